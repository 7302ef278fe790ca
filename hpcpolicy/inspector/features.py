"""What the inspector sees of each proposal: the candidates of one decision and their features.

At each decision the deployed heuristic orders the waiting queue
(:func:`hpcpolicy.env.prior.slot_order`, ties in submit order as the engine breaks them); its
first ``k`` jobs are the *proposals*, best first. Each proposal is described by

* the job features of :mod:`hpcpolicy.env.spaces` (:data:`~hpcpolicy.env.spaces.JOB_FEATURES`:
  its wait, request and whether it fits now), built by the environment's own code
  (:class:`~hpcpolicy.env.observe.Observer`), so they are the policy features every learner
  sees;
* the heuristics' own view of it (issue 43, item 4): for each heuristic of
  :data:`RANKERS`, the job's position in that heuristic's order of the whole waiting queue
  (0: that heuristic's first choice), log-scaled. Positions, not raw scores, so that no
  feature carries a site's seconds or core counts;

and the decision by the machine and queue state: the cluster features of
:data:`~hpcpolicy.env.spaces.CLUSTER_FEATURES` (free resources, queue length, the running
jobs' requested ends). Only submit-time facts, the clock and the machine's state are read.

Example:
    >>> [f.name for f in CANDIDATE_FEATURES][-2:]
    ['rank_wfp3', 'rank_unicep']
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from hpcpolicy.env.observe import Observer
from hpcpolicy.env.prior import PRIORS, prior_kernel, slot_order
from hpcpolicy.env.spaces import CLUSTER_FEATURES, JOB_FEATURES, OBS_KEYS, Feature, normalise

if TYPE_CHECKING:
    from hpcpolicy.cluster import ClusterSpec
    from hpcpolicy.policies.base import QueueView, ScoreKernel
    from hpcpolicy.sim.types import SimConfig
    from hpcpolicy.workload import Workload

__all__ = ["CANDIDATE_FEATURES", "RANKERS", "Candidates", "Featurizer", "inspector_spec"]

I64 = npt.NDArray[np.int64]
F32 = npt.NDArray[np.float32]

RANKERS = PRIORS
"""Heuristics whose order of the queue describes each proposal (every one a policy can start
from: fair share's order lives in the engine's state)."""

RANK_FEATURES: tuple[Feature, ...] = tuple(
    Feature(f"rank_{name}", "count", "log1p", 4096.0,
            f"Position of the job in {name}'s order of every waiting job (0: its first choice).")
    for name in RANKERS)
"""One feature per heuristic of :data:`RANKERS`, after the job features."""

CANDIDATE_FEATURES: tuple[Feature, ...] = (*JOB_FEATURES, *RANK_FEATURES)
"""Per-proposal features, in column order of :attr:`Candidates.jobs`."""


@dataclass(frozen=True)
class Candidates:
    """The proposals of one decision and what the inspector sees of them."""

    order: I64
    """Positions of every waiting job (in ``QueueView.jobs``) in the heuristic's order."""
    jobs: F32
    """``[k, len(CANDIDATE_FEATURES)]`` the proposals' features, best proposal first; zero
    rows past the waiting jobs."""
    cluster: F32
    """``[len(CLUSTER_FEATURES)]`` the machine and queue state."""
    mask: npt.NDArray[np.int8]
    """``[k]`` 1 where the slot holds a proposal."""

    @property
    def count(self) -> int:
        """Number of proposals (at most ``k``)."""
        return int(self.mask.sum())


class Featurizer:
    """Builds the :class:`Candidates` of every decision of one run.

    Args:
        heuristic: The deployed heuristic, whose first ``k`` jobs are proposed.
        workload: The jobs of the run.
        cluster: The machine.
        cfg: The engine's options (the heuristics are bound with them).
        capacity: ``(groups, 4)`` totals as the engine counts them.
        k: Proposals per decision.
    """

    def __init__(self, heuristic: str, workload: Workload, cluster: ClusterSpec,
                 cfg: SimConfig, capacity: I64, k: int) -> None:
        kernels = {name: prior_kernel(name, workload, cluster, cfg) for name in RANKERS}
        self.heuristic: ScoreKernel = _bound(kernels[heuristic])
        self._rankers = [_bound(kernels[name]) for name in RANKERS]
        self._observer = Observer(workload, capacity, k)
        self.k = k

    def candidates(self, view: QueueView) -> Candidates:
        """The proposals of the decision ``view``, best first."""
        order = slot_order(self.heuristic, view.now, view.jobs)
        shown = order[:self.k]
        obs = self._observer.observe(view.now, view.jobs[order], view.fits_now[shown],
                                     view.free, view.running_cores, view.running_req_end)
        ranks = np.empty((shown.shape[0], len(self._rankers)))
        for col, kernel in enumerate(self._rankers):
            position = np.empty(view.jobs.shape[0], np.int64)
            position[slot_order(kernel, view.now, view.jobs)] = np.arange(view.jobs.shape[0])
            ranks[:, col] = position[shown]
        jobs = np.zeros((self.k, len(CANDIDATE_FEATURES)), np.float32)
        jobs[:, :len(JOB_FEATURES)] = obs["jobs"]
        jobs[:shown.shape[0], len(JOB_FEATURES):] = normalise(ranks, RANK_FEATURES)
        return Candidates(order, jobs, obs["cluster"], obs["mask"])


def _bound(kernel: ScoreKernel | None) -> ScoreKernel:
    assert kernel is not None  # every name of RANKERS is a prior, which binds to a kernel
    return kernel


def inspector_spec(k: int, heuristic: str) -> dict[str, Any]:
    """The inputs' contract recorded in the manifest: ``k`` proposals of ``heuristic``
    (``slot_order``), each with :data:`CANDIDATE_FEATURES`, and the cluster features.

    Example:
        >>> spec = inspector_spec(4, "sjf")
        >>> spec["slot_order"], len(spec["job_features"]) - len(RANKERS)
        ('sjf', 7)
    """
    return {"k": k, "slot_order": heuristic, "inputs": list(OBS_KEYS),
            "job_features": [asdict(f) for f in CANDIDATE_FEATURES],
            "cluster_features": [asdict(f) for f in CLUSTER_FEATURES]}
