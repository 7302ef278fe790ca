"""A Slurm-like replay: how the test Slurm (``select/cons_tres`` with ``CR_Core``,
``priority/basic``, ``sched/backfill``) would start a logged workload, second by second.

Where it differs from the pooled simulator (:mod:`hpcpolicy.sim`):

- **Cores on nodes.** Each node has its own free cores; a job asks for ``nodes`` nodes and
  ``procs`` cores spread over them, inside its partition's node set (partitions may overlap).
- **Priority.** ``priority/basic``: first submitted first (ties by log order).
- **Main scheduler** on every submit and job end: jobs in priority order start where they
  fit; once one does not, the nodes of its partition are closed to the rest of that pass
  (lower jobs of an overlapping partition cannot take them), as Slurm's ``schedule()`` does.
- **Backfill** on its tick (``bf_interval``): in priority order, against a per-node plan
  of free cores over time in which running jobs hold their cores until start + time limit
  (Slurm plans with the limit, never the run). A job that fits now for its whole limit
  starts; one that does not gets a reservation at its earliest start, and later jobs plan
  around it. So every blocked job is protected, not only the first (EASY's rule).

Times are whole seconds (sacct's unit); the limit is the logged one (whole minutes in Slurm).

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
from hpcpolicy.sim.types import SimResult
from hpcpolicy.workload import Workload

__all__ = ["SlurmReplayConfig", "place", "slurm_replay"]

I64 = npt.NDArray[np.int64]


@dataclass(frozen=True)
class SlurmReplayConfig(Config):
    """The test Slurm's shape and backfill cadence."""

    label: ClassVar[str] = "slurm replay"

    cores_per_node: int = 16
    nodes: int = 4
    bf_interval: int = 1
    """Seconds between backfill passes (``SchedulerParameters=bf_interval``)."""
    bf_resolution: int = 60
    """Granularity of backfill reservations in seconds (Slurm's default 60)."""

    def validate(self) -> None:
        self._at_least(1, "cores_per_node", "nodes", "bf_interval", "bf_resolution")


def place(free: I64, allowed: Sequence[int], cores: int, nodes: int) -> dict[int, int] | None:
    """Cores per node for a job of ``cores`` cores on exactly ``nodes`` nodes of ``allowed``,
    given ``free`` cores per node; None when it does not fit.

    One node: the fullest node that holds it (best fit, lowest index on ties). Several: the
    nodes with the most free cores, filled in node order with at least one core on each.
    """
    if nodes <= 1:
        fits = [n for n in allowed if free[n] >= cores]
        if not fits:
            return None
        return {min(fits, key=lambda n: (free[n], n)): cores}
    roomy = sorted((n for n in allowed if free[n] > 0), key=lambda n: (-free[n], n))[:nodes]
    if len(roomy) < nodes or sum(int(free[n]) for n in roomy) < cores or cores < nodes:
        return None
    take = dict.fromkeys(roomy, 1)
    left = cores - nodes
    for n in sorted(roomy):
        extra = min(left, int(free[n]) - 1)
        take[n] += extra
        left -= extra
    return take


@dataclass
class _Running:
    planned_end: int
    """start + limit: what backfill plans with."""
    cores: dict[int, int]


class _Replay:
    def __init__(self, w: Workload, cfg: SlurmReplayConfig,
                 partitions: Mapping[str, Sequence[int]]) -> None:
        self.w, self.cfg = w, cfg
        self.sub = np.asarray(w.submit, dtype=np.int64)
        self.limit = np.asarray(w.req_walltime, dtype=np.int64)
        self.dur = np.minimum(np.asarray(w.run_time, dtype=np.int64), self.limit)
        self.cores = np.asarray(w.procs, dtype=np.int64)
        self.nodes = np.maximum(np.asarray(w.nodes, dtype=np.int64), 1)
        self.allowed = [tuple(partitions[w.partitions[p]]) for p in w.partition]
        self.free = np.full(cfg.nodes, cfg.cores_per_node, dtype=np.int64)
        self.start = np.full(len(w), -1, dtype=np.int64)
        self.backfilled = np.zeros(len(w), dtype=bool)
        self.running: dict[int, _Running] = {}
        self.queue: list[int] = []
        self.origin, self.res = int(w.origin), cfg.bf_resolution

    def _begin(self, job: int, now: int, cores: dict[int, int]) -> None:
        for n, c in cores.items():
            self.free[n] -= c
        self.start[job] = now
        self.running[job] = _Running(now + int(self.limit[job]), cores)
        self.queue.remove(job)

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
        # Cores: free cores per node from each breakpoint on, running jobs held to their
        # planned end. Reservations of blocked jobs hold whole nodes (Slurm's backfill map
        # is a node bitmap per time slot), on bf_resolution boundaries.
        times = sorted({now, *(r.planned_end for r in self.running.values())})
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
            found = self._earliest(job, now, times, plan, held)
            if found is None:
                continue
            t, cores = found
            if t == now:
                self._begin(job, now, cores)
                self.backfilled[job] = blocked
                times, plan = _reserve(times, plan, now, now + limit, cores)
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

    def run(self) -> SimResult:
        order = np.lexsort((np.arange(len(self.sub)), self.sub))
        ends: list[tuple[int, int]] = []
        i, n, next_bf, never = 0, len(order), 0, 1 << 62
        while i < n or ends:
            now = min(int(self.sub[order[i]]) if i < n else never,
                      ends[0][0] if ends else never,
                      next_bf if self.queue else never)
            while ends and ends[0][0] == now:
                self.finish(heapq.heappop(ends)[1])
            while i < n and self.sub[order[i]] == now:
                self.queue.append(int(order[i]))
                i += 1
            before = set(self.running)
            self.main_pass(now)
            if now >= next_bf:
                self.backfill_pass(now)
                next_bf = now + self.cfg.bf_interval
            for job in set(self.running) - before:
                heapq.heappush(ends, (now + int(self.dur[job]), job))
            if self.queue and not ends and i >= n:
                raise ConfigError(f"slurm replay: job {self.w.job_id[self.queue[0]]} never "
                                  "fits its partition's nodes; check its cores and nodes")
        start = self.start
        return SimResult(start=start, end=np.where(start >= 0, start + self.dur, -1),
                         never_fits=np.zeros(len(start), dtype=bool),
                         killed=np.asarray(self.w.run_time, dtype=np.int64) > self.limit,
                         backfilled=self.backfilled, stats={"engine": "slurm"})


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
                 partitions: Mapping[str, Sequence[int]]) -> SimResult:
    """Replay ``workload`` as the test Slurm would schedule it (see the module docstring).

    Args:
        workload: the jobs, with their cores, nodes, partition and limit.
        cfg: nodes, cores per node, backfill interval.
        partitions: each partition name of the workload -> the indices of its nodes.

    Raises:
        ConfigError: a partition of the workload is not in ``partitions``, names a node the
            cluster lacks, or a job can never fit its partition.
    """
    for name in workload.partitions:
        if name not in partitions:
            raise ConfigError(f"slurm replay: partition {name!r} of the log has no node set; "
                              f"name it in the partitions ({', '.join(partitions) or 'none'})")
        if any(not 0 <= n < cfg.nodes for n in partitions[name]):
            raise ConfigError(f"slurm replay: partition {name!r} names a node outside "
                              f"0..{cfg.nodes - 1}")
    return _Replay(workload, cfg, partitions).run()
