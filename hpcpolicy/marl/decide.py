"""One select + allocate decision in the GPU engine, for training and deployment alike.

:class:`~hpcpolicy.sim.gpu_engine.GpuEngine` asks its scorer to rank the waiting jobs at every
scheduling step, and its placer to pick one of the candidate placements of each job about to
start. :class:`AgentScorer` and :class:`AgentPlacer` turn those two calls into the agents'
observations (:mod:`hpcpolicy.marl.features`) and hand them to a :data:`Choose` function:
during training one that samples from the networks and records the transition
(:mod:`hpcpolicy.marl.episode`), in deployment one that takes the exported scorers' best
option (:mod:`hpcpolicy.deploy.marl`). So the rules below hold in both:

* The selector sees ``k`` waiting jobs (the oldest, the oldest of those that fit now, those
  with the shortest requests, or those and the longest:
  :data:`~hpcpolicy.marl.features.VISIBLE`) and chooses one; the chosen job becomes the
  queue head (the others follow in submit order). Under the first two rules only a job that
  fits now may be chosen, so the head starts at once, on the allocator's placement; when
  none of the shown jobs fits, nothing can start and nobody is asked: the oldest job is the
  head and backfilling (if any) runs around it, as under FCFS.
  Under ``shortest`` and ``extremes`` any shown job may be chosen; a head that does not fit
  waits for room (backfilling, if any, runs around it) and the selector chooses again at the
  next event.
* The allocator chooses among every candidate placement of that job, and of each job
  backfilling starts (then among the placements in the pool backfilling planned with).
* A decision with a single option is taken without asking.

Example:
    >>> first = lambda agent, obs, now: int(obs["mask"].argmax())
    >>> # GpuEngine(w, spec, cfg, AgentScorer(sel_obs, first), AgentPlacer(alloc_obs, first))
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from hpcpolicy.env.driver import head_scores

if TYPE_CHECKING:
    from hpcpolicy.gpu.placer import PlacementView
    from hpcpolicy.marl.features import AllocatorObserver, SelectorObserver
    from hpcpolicy.policies.base import QueueView

__all__ = ["ALLOCATOR", "SELECTOR", "AgentPlacer", "AgentScorer", "Choose", "Obs"]

SELECTOR, ALLOCATOR = 0, 1
"""Agent indices (:data:`hpcpolicy.marl.networks.AGENTS`)."""

Obs = dict[str, npt.NDArray[Any]]
I64 = npt.NDArray[np.int64]
Choose = Callable[[int, Obs, int], int]
"""``choose(agent, observation, now) -> option``: an index where ``observation["mask"]`` is
true."""


class AgentScorer:
    """The engine's scorer: the selector's chosen job first, then submit order."""

    def __init__(self, observer: SelectorObserver, choose: Choose) -> None:
        self._observer = observer
        self._choose = choose

    def scores(self, view: QueueView) -> npt.NDArray[np.float64]:
        """One score per waiting job; the lowest starts first."""
        seen = self._observer.observe(view)
        if seen is None:
            return np.arange(view.jobs.shape[0], dtype=np.float64)
        obs, shown = seen
        return head_scores(view.jobs.shape[0], int(shown[self.slot(view, obs, shown)]))

    def slot(self, view: QueueView, obs: Obs, shown: I64) -> int:
        """The chosen slot of ``obs`` (``shown``: each slot's position in ``view.jobs``)."""
        valid = np.flatnonzero(obs["mask"])
        return int(valid[0]) if valid.shape[0] == 1 else self._choose(SELECTOR, obs, view.now)


class AgentPlacer:
    """The engine's placer: the allocator's chosen candidate."""

    def __init__(self, observer: AllocatorObserver, choose: Choose) -> None:
        self._observer = observer
        self._choose = choose

    def choose(self, view: PlacementView) -> int:
        """Index into ``view.candidates``."""
        if len(view.candidates) == 1:
            return 0
        return self._choose(ALLOCATOR, self._observer.observe(view), view.now)
