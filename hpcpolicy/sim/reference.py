"""The readable reference engine: an event queue, a policy object and the pure backfilling
functions, in plain Python. The compiled engine (:mod:`hpcpolicy.sim.fast`) must produce the
same schedule for every policy and backfilling mode; a test checks that on random workloads.

One run, step by step:

1. Every job is a SUBMIT event at its submit time (jobs that can never fit are left out and
   reported); every job already running at a warm start is a FINISH event at its end; every
   capacity change (an outage's start or end, :mod:`hpcpolicy.sim.capacity`) is a CAPACITY
   event.
2. Events pop in (time, kind, job) order with FINISH before CAPACITY before SUBMIT before
   PASS, so resources freed at time t are free for the jobs submitted at t. The first FINISH,
   CAPACITY or SUBMIT at a time schedules one PASS at that time.
3. A PASS asks the policy to score the waiting jobs and starts the best one if it fits, then
   asks again. When the best one does not fit, it is the *head*: backfilling (none, EASY or
   conservative) may start other jobs around it, and the pass ends.
4. A started job holds its resources in the node group the allocator picked, for its actual
   run time (cut at the request under ``kill_at_limit``): a FINISH event then frees them.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hpcpolicy.errors import ConfigError, SimulationError
from hpcpolicy.policies.base import QueueView, Scorer, running_order
from hpcpolicy.sim.allocation import get_allocator
from hpcpolicy.sim.backfill import RunningSlot, conservative_backfill, easy_backfill
from hpcpolicy.sim.capacity import G, T
from hpcpolicy.sim.events import Event, EventQueue, Kind
from hpcpolicy.sim.fairshare import DecayedUsage
from hpcpolicy.sim.prepare import Prepared
from hpcpolicy.sim.types import SimConfig
from hpcpolicy.workload import Workload

__all__ = ["ReferenceEngine"]


class ReferenceEngine:
    """One replay of a prepared workload with the project's semantics.

    Example:
        >>> import numpy as np
        >>> from hpcpolicy.cluster import ClusterSpec
        >>> from hpcpolicy.policies import get_policy
        >>> from hpcpolicy.sim.prepare import prepare
        >>> z = np.zeros(2, dtype=np.int64)
        >>> w = Workload(job_id=np.array(["a", "b"], dtype=object), submit=z,
        ...     run_time=np.array([10, 10]), req_walltime=np.array([10, 10]),
        ...     procs=np.array([3, 3]), nodes=z, gpus=z, mem_mib=z,
        ...     user=z.astype(np.int32), partition=z.astype(np.int32), logged_start=z - 1)
        >>> cfg, cl = SimConfig(), ClusterSpec.homogeneous(4)
        >>> eng = ReferenceEngine(prepare(w, cl, cfg), cfg, get_policy("fcfs").bind(w, cl, cfg), w)
        >>> eng.run()["start"].tolist()
        [0, 10]
    """

    def __init__(self, prep: Prepared, cfg: SimConfig, scorer: Scorer,
                 workload: Workload) -> None:
        self.p = prep
        self.cfg = cfg
        self.scorer = scorer
        self.workload = workload
        self.allocator = get_allocator(cfg.allocator)
        self.free = prep.free0.copy()
        self.queue: list[int] = []
        self.running: dict[int, RunningSlot] = {}
        self.start = np.full(prep.n, -1, dtype=np.int64)
        self.group = np.full(prep.n, -1, dtype=np.int64)
        self.backfilled = np.zeros(prep.n, dtype=bool)
        self.usage = DecayedUsage(prep.n_users, cfg.fairshare.half_life_s)
        self.events = EventQueue()
        self.counts = {"events": 0, "passes": 0, "decisions": 0, "started": 0,
                       "backfilled": 0}
        # EASY's promise to the head (checked under cfg.check): job, time, overruns seen.
        self.reserved: tuple[int, int, int] | None = None
        self.overruns = 0

    # ------------------------------------------------------------------ the event loop
    def run(self) -> dict[str, Any]:
        """Replay every event; per-job arrays and counters."""
        p = self.p
        for i in range(p.m):
            j = p.n + i
            g = int(p.pre_group[i])
            self.running[j] = RunningSlot(int(p.pre_req_end[i]), g, p.need[j, g])
            self.events.schedule(Event(int(p.pre_end[i]), Kind.FINISH, j, j))
        for k in np.flatnonzero(~p.never_fits).tolist():
            self.events.schedule(Event(int(p.submit[k]), Kind.SUBMIT, k, k))
        for c in range(p.cap.shape[1]):
            self.events.schedule(Event(int(p.cap[T, c]), Kind.CAPACITY, c, c))
        pass_at: int | None = None
        while self.events:
            ev = self.events.pop()
            if ev.kind is Kind.PASS:
                pass_at = None
                self.counts["passes"] += 1
                self._pass(ev.time)
                continue
            if ev.kind is Kind.CAPACITY:
                self._change(ev.job)
            elif ev.kind is Kind.FINISH:
                self._finish(ev.job, ev.time)
            else:
                self.queue.append(ev.job)
            self.counts["events"] += ev.kind is not Kind.CAPACITY
            if pass_at != ev.time:
                self.events.schedule(Event(ev.time, Kind.PASS, 0))
                pass_at = ev.time
        return {"start": self.start, "group": self.group, "backfilled": self.backfilled,
                "stats": dict(self.counts)}

    def _change(self, c: int) -> None:
        """Apply capacity change ``c``; free may go below zero (running jobs finish)."""
        self.free[self.p.cap[G, c]] += self.p.cap[G + 1:, c]
        self.overruns += 1  # EASY's promise to the head is void across a change

    def _finish(self, j: int, now: int) -> None:
        slot = self.running.pop(j)
        self.free[slot.group] += slot.need
        self._release(j, now)
        if now > slot.req_end:
            self.overruns += 1
        if j < self.p.n:
            self.usage.add(int(self.p.user[j]), int(slot.need[0]), int(self.start[j]), now)

    # ------------------------------------------------------------------ decisions
    def _pass(self, now: int) -> None:
        while self.queue:
            order = self._order(now)
            head = order[0]
            g = self._pick(head)
            if g >= 0:
                self._start(head, g, now, backfilled=False)
                continue
            self._backfill(now, order)
            return

    def _order(self, now: int) -> list[int]:
        jobs = np.array(self.queue, dtype=np.int64)
        need = self.p.need[jobs]
        fits = np.asarray(
            ((need[:, :, 0] >= 0) & (need <= self.free[None]).all(axis=2)).any(axis=1))
        slots = list(self.running.values())
        cores, req_end = running_order(np.array([s.need[0] for s in slots], dtype=np.int64),
                                       np.array([s.req_end for s in slots], dtype=np.int64))
        view = QueueView(now=now, jobs=jobs, workload=self.workload, free=self.free.copy(),
                         capacity=self.p.capacity, fits_now=fits,
                         user_share=self.usage.shares(), running_cores=cores,
                         running_req_end=req_end)
        scores = np.asarray(self.scorer.scores(view), dtype=np.float64)
        self.counts["decisions"] += 1
        if scores.shape != jobs.shape or np.isnan(scores).any():
            raise ConfigError(f"policy returned {scores.size} scores for {jobs.size} waiting "
                              "jobs (or NaN); it must give one number per waiting job")
        return [int(jobs[i]) for i in np.argsort(scores, kind="stable")]

    def _backfill(self, now: int, order: list[int]) -> None:
        slots = list(self.running.values())
        p = self.p
        if self.cfg.backfill == "easy":
            plan = easy_backfill(now, order, p.need, p.length, self.free, slots)
            if self.cfg.check:
                self._check_reservation(order[0], plan.shadow, now)
            starts = plan.starts
        elif self.cfg.backfill == "conservative":
            starts, _ = conservative_backfill(now, order, p.need, p.length, self.free, slots)
        else:
            return
        for j, g in starts:
            if self._placeable(j, g):
                self._start(j, g, now, backfilled=True)

    def _start(self, j: int, g: int, now: int, *, backfilled: bool) -> None:
        if self.cfg.check and not backfilled and self.reserved:
            # The head starts (on time?), or a better-scored job overtakes it: either way the
            # promise made to the head is settled.
            if self.reserved[0] == j and self._trusted(now) and now > self.reserved[1]:
                raise SimulationError(
                    f"invariant violated: EASY started head job {self.workload.job_id[j]} at "
                    f"t={now} s, after its "
                    f"reservation at t={self.reserved[1]} s, although no job ran past its "
                    "requested walltime")
            self.reserved = None
        p = self.p
        self.start[j] = now
        self.group[j] = g
        self.backfilled[j] = backfilled
        self.free[g] -= p.need[j, g]
        self.running[j] = RunningSlot(now + int(p.length[j]), g, p.need[j, g])
        self.events.schedule(Event(now + self._hold(j, g, now), Kind.FINISH, j, j))
        self.queue.remove(j)
        self.counts["started"] += 1
        self.counts["backfilled"] += int(backfilled)

    # ------------------------------------------------------------------ placement hooks
    # The node-level GPU engine (hpcpolicy.sim.gpu_engine) overrides these four; here a job
    # only needs room in its group's totals and runs for its prepared duration.
    def _pick(self, j: int) -> int:
        """The group job ``j`` starts in now, or -1 when it does not fit."""
        return self.allocator.pick(self.p.need[j], self.free)

    def _placeable(self, j: int, g: int) -> bool:
        """Whether a job backfilling chose for group ``g`` can be placed there now."""
        return True

    def _hold(self, j: int, g: int, now: int) -> int:
        """Take job ``j``'s place in group ``g``; how long it runs."""
        return int(self.p.dur[j])

    def _release(self, j: int, now: int) -> None:
        """Give back the place of job ``j``, which ends now."""

    # ------------------------------------------------------------------ EASY's promise
    def _trusted(self, now: int) -> bool:
        """No running job is past its requested end, and none ended late since the
        reservation was made: then EASY must keep its promise to the head."""
        assert self.reserved is not None
        return (self.overruns == self.reserved[2]
                and all(s.req_end > now for s in self.running.values()))

    def _check_reservation(self, head: int, shadow: int, now: int) -> None:
        if (self.reserved and self.reserved[0] == head and self._trusted(now)
                and shadow > self.reserved[1]):
            raise SimulationError(
                f"invariant violated: EASY moved the reservation of head job "
                f"{self.workload.job_id[head]} later "
                f"(at t={now} s) although no job ran past its requested walltime")
        self.reserved = (head, shadow, self.overruns)
