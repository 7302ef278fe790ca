"""The small protocol every scheduling policy implements, heuristic or learned.

A policy is *bound* to one run (workload, cluster, config) and then scores the waiting jobs
at each decision: the lowest score starts first, and ties go to the earlier submit (then the
earlier job in the workload). The engine starts the best-scored job if it fits, asks again,
and when the best job does not fit it backfills around it in score order.

Heuristics bind to a :class:`ScoreKernel`: a formula from a short fixed list with per-job
coefficients, which the compiled engine evaluates itself without calling back into Python.
Any other scorer (a learned policy) is called from Python at each decision.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    from hpcpolicy.cluster import ClusterSpec
    from hpcpolicy.policies.settings import FairshareConfig, RunSettings
    from hpcpolicy.workload import Workload

__all__ = [
    "KERNEL_KINDS",
    "LN2",
    "Policy",
    "QueueView",
    "ScoreKernel",
    "Scorer",
    "running_order",
]

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]

LN2 = math.log(2.0)

KERNEL_KINDS = ("static", "wfp3", "unicep", "fairshare")
"""Formulas the compiled engine evaluates (w = now - submit, as a float; lower runs first):

* ``static``: ``a[j]``
* ``wfp3``: ``-(w * w * w) * a[j]`` with ``a = procs / walltime^3``
* ``unicep``: ``-(w / a[j])`` with ``a = log2(max(procs, 2)) * walltime``
* ``fairshare``: ``-(a[j] + weight_age * min(w / max_age, 1) + weight_fairshare * f(user))``
  with ``a = weight_size * procs / cores`` and ``f(u) = exp(-ln2 * users * share[u])``
"""


@dataclass(frozen=True)
class QueueView:
    """What a policy sees at one decision."""

    now: int
    """Simulated time (s since the workload's origin)."""
    jobs: I64
    """Indices (into the workload) of the waiting jobs, in submit order."""
    workload: Workload
    """The whole workload; policies read only its submit-time columns."""
    free: I64
    """(groups, 4) free cores, GPUs, MiB and nodes now."""
    capacity: I64
    """(groups, 4) totals of the cluster."""
    fits_now: npt.NDArray[np.bool_]
    """(len(jobs),) whether each waiting job could start now."""
    user_share: F64
    """Each user's share of the decayed past usage of all users (sums to 1, or all 0 before
    any job has finished); see :class:`hpcpolicy.sim.types.FairshareConfig`."""
    running_cores: I64 = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    """Cores held by each running job (whole nodes' cores under exclusive nodes), jobs
    running since a warm start included, sorted by requested end, then cores."""
    running_req_end: I64 = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    """When each running job's requested walltime runs out (same order); never its actual
    end."""


def running_order(cores: I64, req_end: I64) -> tuple[I64, I64]:
    """The running jobs' (cores, requested ends) in the order :class:`QueueView` lists them."""
    order = np.lexsort((cores, req_end))
    return np.asarray(cores)[order], np.asarray(req_end)[order]


@runtime_checkable
class Scorer(Protocol):
    """A policy bound to one run."""

    def scores(self, view: QueueView) -> F64:
        """One float per waiting job (``view.jobs``); the lowest starts first."""
        ...


@runtime_checkable
class Policy(Protocol):
    """A scheduling policy: a name and a way to bind it to one run.

    Example:
        >>> from hpcpolicy.policies import get_policy
        >>> isinstance(get_policy("sjf"), Policy)
        True
    """

    @property
    def name(self) -> str:
        """Name shown in reports (a registry name, or the artifact's)."""
        ...

    def bind(self, workload: Workload, cluster: ClusterSpec, cfg: RunSettings) -> Scorer:
        """A scorer for this workload on this cluster."""
        ...


@dataclass(frozen=True)
class ScoreKernel:
    """A scorer the compiled engine evaluates itself (see :data:`KERNEL_KINDS`)."""

    kind: str
    """One of :data:`KERNEL_KINDS`."""
    a: F64
    """Per-job coefficient of the formula (len = workload jobs)."""
    submit: I64
    """Submit times of the workload (s since origin)."""
    user: I64
    """User codes of the workload."""
    fairshare: FairshareConfig | None = None
    """Weights of the ``fairshare`` formula; None for the other kinds."""
    n_users: int = 1
    """Number of users (equal shares are 1 / n_users)."""
    name: str = field(default="")
    """Name of the policy it came from."""

    @property
    def code(self) -> int:
        """Index of :attr:`kind` in :data:`KERNEL_KINDS` (what the compiled engine reads)."""
        return KERNEL_KINDS.index(self.kind)

    def scores(self, view: QueueView) -> F64:
        """The formula evaluated with numpy (the reference engine's path)."""
        if self.kind != "fairshare":
            return self.at(view.now, view.jobs)
        j = view.jobs
        w = (view.now - self.submit[j]).astype(np.float64)
        fs = self.fairshare
        assert fs is not None
        age = np.minimum(w / float(fs.max_age_s), 1.0)
        # math.exp per user, as the compiled engine does (numpy's vectorised exp may round
        # differently in the last bit, which could reorder near-ties).
        factor = np.array([math.exp(-LN2 * self.n_users * s) for s in view.user_share])
        return -(self.a[j] + fs.weight_age * age + fs.weight_fairshare * factor[self.user[j]])

    def at(self, now: int, jobs: I64) -> F64:
        """Scores of ``jobs`` at time ``now``, for every kind but ``fairshare`` (which reads
        the users' decayed usage, the engine's state)."""
        if self.kind == "static":
            return self.a[jobs].copy()
        w = (now - self.submit[jobs]).astype(np.float64)
        if self.kind == "wfp3":
            return -(w * w * w) * self.a[jobs]
        if self.kind == "unicep":
            return -(w / self.a[jobs])
        raise ValueError(f"the {self.kind} formula needs the users' usage: use scores(view)")
