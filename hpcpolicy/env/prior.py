"""The heuristic a residual policy starts from (``EnvConfig.prior``, ``train --prior``).

Without a prior, the policy's slots hold the oldest waiting jobs in submit order, and a chosen
head is followed by the others in submit order. With a prior heuristic, every waiting job is
ranked by that heuristic's formula (ties in submit order, as the engine breaks them): the
slots hold its ``k`` best, best first, and the jobs after the chosen head follow in its order,
so backfilling also runs in its order. A policy that always takes slot 0 then schedules
exactly as the heuristic does, and the network's rank bias
(:class:`~hpcpolicy.learn.networks.JobScorer`) makes that its starting point: it learns where to
depart from the heuristic. The heuristic's best jobs are in view even when more than ``k`` wait
(the newest ones, for LCFS), which the oldest ``k`` would not show.

Example:
    >>> import numpy as np
    >>> from hpcpolicy.cluster import ClusterSpec
    >>> from hpcpolicy.sim.types import SimConfig
    >>> from hpcpolicy.workload import Workload
    >>> z = np.zeros(3, dtype=np.int64)
    >>> w = Workload(job_id=np.array(["a", "b", "c"], dtype=object), submit=np.array([0, 5, 9]),
    ...     run_time=z + 10, req_walltime=np.array([30, 10, 20]), procs=z + 1, nodes=z,
    ...     gpus=z, mem_mib=z, user=z.astype(np.int32), partition=z.astype(np.int32),
    ...     logged_start=z - 1)
    >>> kernel = prior_kernel("sjf", w, ClusterSpec.homogeneous(4), SimConfig())
    >>> slot_order(kernel, 10, np.array([0, 1, 2])).tolist()        # b (10 s), c, a
    [1, 2, 0]
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from hpcpolicy.errors import ConfigError
from hpcpolicy.policies.heuristics import get_policy, policy_names

if TYPE_CHECKING:
    from hpcpolicy.cluster import ClusterSpec
    from hpcpolicy.policies.base import ScoreKernel
    from hpcpolicy.sim.types import SimConfig
    from hpcpolicy.workload import Workload

__all__ = ["OLDEST", "PRIORS", "prior_kernel", "slot_order"]

I64 = npt.NDArray[np.int64]

OLDEST = "oldest"
"""The slot order without a prior: the oldest waiting jobs, in submit order."""

PRIORS = tuple(name for name in policy_names() if name != "fairshare")
"""Heuristics a policy can start from. Fair share is not one: its order depends on the users'
decayed usage, which lives in the engine's state, not in the waiting jobs."""


def prior_kernel(name: str | None, workload: Workload, cluster: ClusterSpec,
                 cfg: SimConfig) -> ScoreKernel | None:
    """The prior's formula bound to ``workload`` (None without a prior)."""
    if name is None or name == OLDEST:
        return None
    if name not in PRIORS:
        raise ConfigError(f"prior {name!r} is not a heuristic a policy can start from; "
                          f"valid: {', '.join(PRIORS)}")
    return get_policy(name).bind(workload, cluster, cfg)


def slot_order(kernel: ScoreKernel, now: int, waiting: I64) -> I64:
    """Positions in ``waiting`` (workload indices in submit order) from the prior's best job to
    its worst."""
    return np.argsort(kernel.at(now, waiting), kind="stable").astype(np.int64)
