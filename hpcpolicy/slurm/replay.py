"""A Slurm-like replay: how the test Slurm (``select/cons_tres`` with ``CR_Core``,
``priority/basic``, ``sched/backfill``) would start a logged workload.

Where it differs from the pooled simulator (:mod:`hpcpolicy.sim`):

- **Cores on nodes.** Each node has its own free cores; a job asks for ``nodes`` nodes and
  ``procs`` cores spread over them, inside its partition's node set (partitions may overlap).
  Nodes are chosen as ``cons_tres`` does (see :func:`place`).
- **Priority.** ``priority/basic``: first submitted first (ties by log order).
- **Main scheduler** on every submit and job end: jobs in priority order start where they
  fit; once one does not, the nodes of its partition are closed to the rest of that pass
  (lower jobs of an overlapping partition cannot take them), as Slurm's ``schedule()`` does.
- **Backfill** on its tick (``bf_interval``): in priority order, against a per-node plan
  of free cores over time in which running jobs hold their cores until start + time limit
  (Slurm plans with the limit, never the run). A job that fits now for its whole limit
  starts; one that does not gets a reservation at its earliest start, and later jobs plan
  around it. So every blocked job is protected, not only the first (EASY's rule).
- **Time within the second.** Slurm acts on sub-second events but logs whole seconds. The
  replay runs on milliseconds: a job is submitted in the middle of its logged second and
  seen by the scheduler ``submit_latency`` later; an ended job holds its cores for
  ``end_latency`` (Slurm's completing state), then a main pass runs; backfill ticks in the
  middle of each second. Both latencies are fitted from the log by default
  (:func:`start_latencies`). Logged starts are whole seconds, so the replayed ones are too.

The limit is the logged one (whole minutes in Slurm); the run is the logged elapsed time.

Outages (:mod:`hpcpolicy.sim.capacity`, whole nodes only) are replayed as the pooled engines
replay them: an outage of ``nodes`` nodes takes the last ``nodes`` nodes (highest indices) at
its start and gives them back at its end; jobs running there finish, and no job is placed on
a node that is down (its free count is below zero until it is back). The main pass runs at
each change; backfill plans with what is up now (it does not see an outage coming or ending).
Overlapping outages of the same nodes take them once.

Example:
    >>> nodes = {"batch": (0, 1, 2, 3), "short": (2, 3)}
    >>> result = slurm_replay(workload, SlurmReplayConfig(), nodes)  # doctest: +SKIP
    >>> result.start[:3]                                             # doctest: +SKIP
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import numpy.typing as npt

from hpcpolicy.config import Config
from hpcpolicy.errors import ConfigError
from hpcpolicy.sim.capacity import Outage
from hpcpolicy.sim.types import SimResult
from hpcpolicy.workload import Workload

__all__ = ["SlurmReplayConfig", "place", "slurm_replay", "start_latencies"]

I64 = npt.NDArray[np.int64]
MS = 1000
"""Replay ticks per second."""
_RELEASE, _CAPACITY, _ARRIVE = 0, 1, 2
"""Event kinds; at the same instant, freed cores come before capacity changes, before new
jobs."""


@dataclass(frozen=True)
class SlurmReplayConfig(Config):
    """The test Slurm's shape, backfill cadence and hand-over latencies."""

    label: ClassVar[str] = "slurm replay"

    cores_per_node: int = 16
    nodes: int = 4
    bf_interval: int = 1
    """Seconds between backfill passes (``SchedulerParameters=bf_interval``)."""
    bf_resolution: int = 60
    """Granularity of backfill reservations in seconds (Slurm's default 60)."""
    submit_latency: float | None = None
    """Seconds from a submission to the pass that may start the job; None: fitted from the
    log (:func:`start_latencies`)."""
    end_latency: float | None = None
    """Seconds an ended job keeps its cores before the next pass; None: fitted from the log."""

    def validate(self) -> None:
        self._at_least(1, "cores_per_node", "nodes", "bf_interval", "bf_resolution")
        for name in ("submit_latency", "end_latency"):
            value = getattr(self, name)
            self._require(value is None or 0 <= value < self.bf_interval, name,
                          f"must be at least 0 and under bf_interval ({self.bf_interval} s)")


def _runs(free: I64, allowed: Sequence[int]) -> list[list[int]]:
    """Runs of consecutive node indices of ``allowed`` that have a free core."""
    runs: list[list[int]] = []
    for n in sorted(n for n in allowed if free[n] > 0):
        if runs and runs[-1][-1] == n - 1:
            runs[-1].append(n)
        else:
            runs.append([n])
    return runs


def place(free: I64, allowed: Sequence[int], cores: int, nodes: int) -> dict[int, int] | None:
    """Cores per node for a job of ``cores`` cores on exactly ``nodes`` nodes of ``allowed``,
    given ``free`` cores per node; None when it does not fit.

    As ``cons_tres`` (Slurm 22.05, no topology, equal node weights): the usable nodes form
    runs of consecutive indices; the run taken first is the one with the fewest free cores
    among those that can hold the job, else the one with the most. In it, a one-node job
    takes the fullest node that holds it (lowest index on ties); a job of several nodes
    takes the nodes in index order, each as many cores as it has while leaving one per node
    still to come, the last node being the first that holds the rest. Runs are used until
    the job has its nodes.
    """
    runs = _runs(free, allowed)
    left, want, take = cores, nodes, {}
    while runs and want > 0:
        holds = [sum(int(free[n]) for n in r) >= left and len(r) >= want for r in runs]
        if any(holds):
            best = min((k for k in range(len(runs)) if holds[k]),
                       key=lambda k: sum(int(free[n]) for n in runs[k]))
        else:
            best = max(range(len(runs)), key=lambda k: sum(int(free[n]) for n in runs[k]))
        run = runs.pop(best)
        if want == 1:
            fits = [n for n in run if free[n] >= left]
            run = [min(fits, key=lambda n: (free[n], n))] if fits else run
        for n in run:
            if want == 0:
                break
            if want == 1 and free[n] < left:
                continue
            use = max(1, min(int(free[n]), left - (want - 1)))
            take[n] = use
            left, want = left - use, want - 1
    return take if want == 0 and left <= 0 else None


def start_latencies(w: Workload, bf_interval: int = 1) -> tuple[float, float]:
    """The mean hand-over latencies of a logged Slurm run, in seconds: (submit, end).

    Submit: the mean logged start - submit of the jobs that started within ``bf_interval``
    of their submission with no job ending in between (they waited for nothing but the
    scheduler). End: for each job that waited longer, the logged start minus the latest
    logged end at or before it, where that is within ``bf_interval`` (the job started when
    another ended); the mean of those. Whole-second logs give 0 or 1 s each; their mean
    estimates the sub-second latency, as each event's position within its second is
    uniform. 0 where the log has no such job (or no logged starts).
    """
    logged = np.asarray(w.logged_start, dtype=np.int64)
    sub = np.asarray(w.submit, dtype=np.int64)
    seen = logged >= 0
    ends = np.sort((logged + np.asarray(w.run_time, dtype=np.int64))[seen])
    wait = logged - sub
    prompt, handed = [], []
    for j in np.flatnonzero(seen):
        last_end = np.searchsorted(ends, logged[j], side="right") - 1
        before = int(ends[last_end]) if last_end >= 0 else -1
        if wait[j] <= bf_interval:
            if before < sub[j]:
                prompt.append(float(wait[j]))
        elif logged[j] - before <= bf_interval:
            handed.append(float(logged[j] - before))
    return (float(np.mean(prompt)) if prompt else 0.0,
            float(np.mean(handed)) if handed else 0.0)


@dataclass
class _Running:
    planned_end: int
    """Start (its whole second) + limit: what backfill plans with."""
    cores: dict[int, int]


class _Replay:
    def __init__(self, w: Workload, cfg: SlurmReplayConfig,
                 partitions: Mapping[str, Sequence[int]], outages: Sequence[Outage]) -> None:
        self.w, self.cfg = w, cfg
        fitted = start_latencies(w, cfg.bf_interval)
        sub_lat = fitted[0] if cfg.submit_latency is None else cfg.submit_latency
        end_lat = fitted[1] if cfg.end_latency is None else cfg.end_latency
        self.latency = (round(sub_lat * MS), round(end_lat * MS))
        self.sub = np.asarray(w.submit, dtype=np.int64)
        self.limit = np.asarray(w.req_walltime, dtype=np.int64)
        self.dur = np.minimum(np.asarray(w.run_time, dtype=np.int64), self.limit)
        self.cores = np.asarray(w.procs, dtype=np.int64)
        self.nodes = np.maximum(np.asarray(w.nodes, dtype=np.int64), 1)
        self.allowed = [tuple(partitions[w.partitions[p]]) for p in w.partition]
        self.free = np.full(cfg.nodes, cfg.cores_per_node, dtype=np.int64)
        self.start = np.full(len(w), -1, dtype=np.int64)
        """Start in ticks (ms)."""
        self.backfilled = np.zeros(len(w), dtype=bool)
        self.running: dict[int, _Running] = {}
        self.queue: list[int] = []
        self.origin, self.res = int(w.origin), cfg.bf_resolution
        self.outages = outages
        self.down = np.zeros(cfg.nodes, dtype=np.int64)
        """Outages holding each node now (a node is down while > 0)."""

    def _begin(self, job: int, now: int, cores: dict[int, int]) -> None:
        for n, c in cores.items():
            self.free[n] -= c
        self.start[job] = now
        self.running[job] = _Running(now // MS + int(self.limit[job]), cores)
        self.queue.remove(job)

    def change(self, k: int) -> None:
        """Capacity change ``k``: outage ``k // 2`` starts (even) or ends (odd)."""
        o = self.outages[k // 2]
        nodes = np.arange(self.cfg.nodes - o.nodes, self.cfg.nodes)
        step = 1 if k % 2 == 0 else -1
        turned = nodes[self.down[nodes] == (0 if step > 0 else 1)]
        self.down[nodes] += step
        self.free[turned] -= step * self.cfg.cores_per_node  # below zero while down

    def finish(self, job: int) -> None:
        for n, c in self.running.pop(job).cores.items():
            self.free[n] += c

    def main_pass(self, now: int) -> None:
        closed: set[int] = set()
        for job in list(self.queue):
            open_nodes = [n for n in self.allowed[job] if n not in closed]
            cores = place(self.free, open_nodes, int(self.cores[job]), int(self.nodes[job]))
            if cores is None:
                closed.update(self.allowed[job])
            else:
                self._begin(job, now, cores)

    def backfill_pass(self, now: int) -> None:
        # Planned in whole seconds, as Slurm does. Cores: free cores per node from each
        # breakpoint on, running jobs held to their planned end. Reservations of blocked
        # jobs hold whole nodes (Slurm's backfill map is a node bitmap per time slot), on
        # bf_resolution boundaries.
        sec = now // MS
        times = sorted({sec, *(r.planned_end for r in self.running.values())})
        plan = np.tile(self.free, (len(times), 1))
        for r in self.running.values():
            for k, t in enumerate(times):
                if t >= r.planned_end:
                    for n, c in r.cores.items():
                        plan[k, n] += c
        held: list[tuple[int, int, frozenset[int]]] = []
        blocked = False
        for job in list(self.queue):
            limit = int(self.limit[job])
            found = self._earliest(job, sec, times, plan, held)
            if found is None:
                continue
            t, cores = found
            if t == sec:
                self._begin(job, now, cores)
                self.backfilled[job] = blocked
                times, plan = _reserve(times, plan, sec, sec + limit, cores)
            else:
                blocked = True
                # Slurm 22.05 rounds both ends down, keeping at least one slot
                t0 = self._align(t)
                held.append((t0, max(self._align(t + limit), t0 + self.res), frozenset(cores)))

    def _align(self, t: int) -> int:
        """``t`` rounded down to a bf_resolution boundary of absolute time."""
        return (t + self.origin) // self.res * self.res - self.origin

    def _earliest(self, job: int, now: int, times: list[int], plan: I64,
                  held: list[tuple[int, int, frozenset[int]]]
                  ) -> tuple[int, dict[int, int]] | None:
        """The first candidate start (now, a planned end, a reservation's end) at which
        ``job`` fits for its whole limit, with its cores per node."""
        limit = int(self.limit[job])
        for t in sorted({*times, *(r[1] for r in held if r[1] > now)}):
            taken = set().union(*(r[2] for r in held if r[0] <= t + limit and r[1] > t))
            nodes = [n for n in self.allowed[job] if n not in taken]
            k0 = int(np.searchsorted(times, t, side="right")) - 1
            k1 = max(int(np.searchsorted(times, t + limit, side="left")), k0 + 1)
            cores = place(plan[k0:k1].min(axis=0), nodes, int(self.cores[job]),
                          int(self.nodes[job]))
            if cores is not None:
                return t, cores
        return None

    def _next_tick(self, t: int) -> int:
        """The first backfill tick (the middle of a second, every bf_interval) at or
        after ``t``."""
        step, phase = self.cfg.bf_interval * MS, MS // 2
        return phase + -(-(t - phase) // step) * step

    def run(self) -> SimResult:
        sub_lat, end_lat = self.latency
        # a job is submitted in the middle of its logged second
        events = [(int(s) * MS + MS // 2 + sub_lat, _ARRIVE, j) for j, s in enumerate(self.sub)]
        events += [(int(t) * MS, _CAPACITY, 2 * i + e) for i, o in enumerate(self.outages)
                   for e, t in enumerate((o.start, o.end))]
        heapq.heapify(events)
        now, last_bf, never = 0, -1, 1 << 62
        while events or self.queue:
            at_event = events[0][0] if events else never
            at_bf = self._next_tick(max(last_bf + 1, now)) if self.queue else never
            now = min(at_event, at_bf)
            while events and events[0][0] == now:
                _, kind, job = heapq.heappop(events)
                if kind == _RELEASE:
                    self.finish(job)
                elif kind == _CAPACITY:
                    self.change(job)
                else:
                    self.queue.append(job)
            before = set(self.running)
            if at_event == now:
                self.main_pass(now)
            if at_bf == now:
                self.backfill_pass(now)
                last_bf = now
            for job in set(self.running) - before:
                heapq.heappush(events, (now + int(self.dur[job]) * MS + end_lat, _RELEASE, job))
            if self.queue and not events and at_bf == now:
                raise ConfigError(f"slurm replay: job {self.w.job_id[self.queue[0]]} never "
                                  "fits its partition's nodes; check its cores and nodes")
        start = np.where(self.start >= 0, self.start // MS, -1)
        return SimResult(start=start, end=np.where(start >= 0, start + self.dur, -1),
                         never_fits=np.zeros(len(start), dtype=bool),
                         killed=np.asarray(self.w.run_time, dtype=np.int64) > self.limit,
                         backfilled=self.backfilled,
                         stats={"engine": "slurm", "backfilled": int(self.backfilled.sum()),
                                "submit_latency_s": sub_lat / MS,
                                "end_latency_s": end_lat / MS})


def _reserve(times: list[int], plan: I64, t0: int, t1: int,
             cores: dict[int, int]) -> tuple[list[int], I64]:
    """``plan`` with ``cores`` taken from ``t0`` to ``t1`` (breakpoints added as needed)."""
    for t in (t0, t1):
        if t not in times:
            k = int(np.searchsorted(times, t))
            plan = np.insert(plan, k, plan[k - 1], axis=0)
            times = [*times[:k], t, *times[k:]]
    for k, t in enumerate(times):
        if t0 <= t < t1:
            for n, c in cores.items():
                plan[k, n] -= c
    return times, plan


def slurm_replay(workload: Workload, cfg: SlurmReplayConfig,
                 partitions: Mapping[str, Sequence[int]],
                 outages: Sequence[Outage] = ()) -> SimResult:
    """Replay ``workload`` as the test Slurm would schedule it (see the module docstring).

    Args:
        workload: the jobs, with their cores, nodes, partition and limit.
        cfg: nodes, cores per node, backfill interval, latencies.
        partitions: each partition name of the workload -> the indices of its nodes.
        outages: whole nodes out of service over time (see the module docstring).

    Raises:
        ConfigError: a partition of the workload is not in ``partitions``, names a node the
            cluster lacks, a job can never fit its partition, or an outage takes single
            cores or more nodes than there are.
    """
    for o in outages:
        if o.cores or o.nodes > cfg.nodes:
            raise ConfigError(f"slurm replay: outage at t={o.start} s takes {o.cores} single "
                              f"cores and {o.nodes} nodes of {cfg.nodes}; give whole nodes, "
                              "at most all of them")
    for name in workload.partitions:
        if name not in partitions:
            raise ConfigError(f"slurm replay: partition {name!r} of the log has no node set; "
                              f"name it in the partitions ({', '.join(partitions) or 'none'})")
        if any(not 0 <= n < cfg.nodes for n in partitions[name]):
            raise ConfigError(f"slurm replay: partition {name!r} names a node outside "
                              f"0..{cfg.nodes - 1}")
    return _Replay(workload, cfg, partitions, outages).run()
