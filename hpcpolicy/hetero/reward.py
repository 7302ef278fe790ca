"""The ADLRO reward: -(job completion time + lambda * idle GPU time), measured per decision.

Step ``k`` of the environment runs from the agent's decision ``k`` (time ``t_k``) to its next
decision (``t_{k+1}``), or to the end of the episode. Its reward is::

    r_k = -(JCT_k + lambda * IDLE_k) / scale

* ``JCT_k`` (seconds): the completion time, end - submit (wait plus run), of every job
  placed during the step: the job of decision ``k``, and the jobs placed after it without a
  choice (one possible GPU type, or a backfilled job, whose pool backfilling fixed). A job's
  run time is the engine's (GPU speed, spread penalty, kill at the limit), known once it has
  started.
* ``IDLE_k`` (GPU-seconds): the integral over ``[t_k, t_{k+1})`` of the cluster's free GPUs
  (fractions counted), taken only while at least one job waits: GPUs left idle while there
  is work for them. Idle GPUs with an empty queue are not the placer's doing, and after the
  last start no job waits, so an episode's idle time ends there.
* ``scale`` (seconds): ``reward_scale_s`` of :class:`~hpcpolicy.hetero.config.GpuDqnConfig`,
  by default the mean logged run time of the training part's jobs: a job that runs as logged
  and does not wait costs about 1.

Summed over an episode, the return is minus (the completion times of the jobs placed from the
first decision on + lambda x the GPU time idle while jobs waited from then on) / scale:
exactly the objective, and each term lands in the step that caused it as early as it is
known. Jobs placed before the first real choice belong to no step.

Example:
    >>> AdlroTerms(jct_s=600.0, idle_gpu_s=200.0, jobs=1).reward(idle_weight=0.5, scale_s=100.0)
    -7.0
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from hpcpolicy.gpu.topology import MILLI
from hpcpolicy.hetero.observe import QueueTracker
from hpcpolicy.sim.gpu_engine import job_shares
from hpcpolicy.workload import Workload

__all__ = ["AdlroMeter", "AdlroTerms", "reward_spec"]

I64 = npt.NDArray[np.int64]


def reward_spec(idle_weight: float, scale_s: float) -> dict[str, Any]:
    """The reward as recorded in config.json and the policy manifest."""
    return {"name": "adlro", "idle_weight": idle_weight, "scale_s": scale_s,
            "definition": "-(completion time of the jobs placed + idle_weight x GPU-seconds "
                          "idle while jobs wait) / scale_s, per decision; see "
                          "hpcpolicy.hetero.reward"}


@dataclass
class AdlroTerms:
    """The two terms of one step (or of a whole episode, summed)."""

    jct_s: float = 0.0
    """Completion times of the jobs placed, summed (s)."""
    idle_gpu_s: float = 0.0
    """GPU-seconds idle while jobs waited."""
    jobs: int = 0
    """Jobs placed."""

    def reward(self, idle_weight: float, scale_s: float) -> float:
        """``-(jct_s + idle_weight * idle_gpu_s) / scale_s``."""
        return -(self.jct_s + idle_weight * self.idle_gpu_s) / scale_s

    def add(self, other: AdlroTerms) -> None:
        """Add ``other``'s terms to these."""
        self.jct_s += other.jct_s
        self.idle_gpu_s += other.idle_gpu_s
        self.jobs += other.jobs


class AdlroMeter:
    """Measures the ADLRO terms of one replay, decision by decision.

    Call :meth:`advance` at every placement decision (before the job is placed),
    :meth:`settle` when the replay ends, :meth:`place` for every job placed, :meth:`take` for
    the terms since the last take. ``queue`` must see the same placements
    (:meth:`~hpcpolicy.hetero.observe.QueueTracker.place`).
    """

    def __init__(self, workload: Workload, queue: QueueTracker, capacity_milli: int) -> None:
        self.queue = queue
        self.submit = np.asarray(workload.submit, dtype=np.int64)
        self.milli = np.asarray(workload.gpus, dtype=np.int64) * job_shares(workload)
        self.capacity = capacity_milli
        self._pending: list[tuple[int, int]] = []
        self._ends: list[int] = []
        self._held: list[int] = []
        self.last: int | None = None
        self._terms = AdlroTerms()

    def place(self, job: int, now: int) -> None:
        """``job`` starts at ``now``; its end is read at the next :meth:`advance`."""
        self._pending.append((job, now))

    def settle(self, dur: I64) -> None:
        """Count the jobs placed since the last call (``dur``: the engine's run times, set
        once a job has started); at the end of a replay, the last call."""
        for job, start in self._pending:
            end = start + int(dur[job])
            self._terms.jct_s += end - int(self.submit[job])
            self._terms.jobs += 1
            self._ends.append(end)
            self._held.append(int(self.milli[job]))
        self._pending.clear()

    def advance(self, now: int, dur: I64) -> None:
        """:meth:`settle`, then add the idle GPU time up to the decision at ``now``."""
        self.settle(dur)
        if self.last is not None and now > self.last:
            self._terms.idle_gpu_s += self._idle(self.last, now) / MILLI
        keep = [i for i, end in enumerate(self._ends) if end > now]
        self._ends = [self._ends[i] for i in keep]
        self._held = [self._held[i] for i in keep]
        self.last = now if self.last is None else max(self.last, now)

    def _idle(self, a: int, b: int) -> float:
        """Free GPU thousandths x seconds over ``[a, b)`` while a job waits (no start
        happens inside: every start is a decision)."""
        ends = np.asarray(self._ends, dtype=np.int64)
        held = np.asarray(self._held, dtype=np.int64)
        inside = ends[(ends > a) & (ends < b)]
        points = np.unique(np.concatenate([[a], inside, self.queue.arrivals_between(a, b)]))
        bounds = np.append(points, b)
        idle = 0.0
        for s, e in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
            if self.queue.arrived(s) > self.queue.placed_jobs:
                idle += float(self.capacity - int(held[ends > s].sum())) * (e - s)
        return idle

    def take(self) -> AdlroTerms:
        """The terms measured since the last take (then zeroed)."""
        terms, self._terms = self._terms, AdlroTerms()
        return terms
