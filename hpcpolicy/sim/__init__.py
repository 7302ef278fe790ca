"""The scheduling simulator: replay a workload on a cluster under a policy.

Example:
    >>> import numpy as np
    >>> from hpcpolicy.cluster import ClusterSpec
    >>> from hpcpolicy.sim import SimConfig, simulate
    >>> from hpcpolicy.workload import Workload
    >>> z = np.zeros(2, dtype=np.int64)
    >>> w = Workload(job_id=np.array(["a", "b"], dtype=object), submit=z,
    ...     run_time=np.array([60, 60]), req_walltime=np.array([60, 60]),
    ...     procs=np.array([4, 4]), nodes=z, gpus=z, mem_mib=z,
    ...     user=z.astype(np.int32), partition=z.astype(np.int32), logged_start=z - 1)
    >>> simulate(w, ClusterSpec.homogeneous(4), SimConfig(policy="fcfs")).start.tolist()
    [0, 60]

``simulate`` and ``Stepper`` load the compiled engine (numba) on first use, so importing
``hpcpolicy.sim.types`` alone stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hpcpolicy.policies.settings import FairshareConfig
from hpcpolicy.sim.types import BACKFILL_MODES, RunningJobs, SimConfig, SimResult

if TYPE_CHECKING:
    from hpcpolicy.sim.compiled import Stepper
    from hpcpolicy.sim.engine import simulate

__all__ = [
    "BACKFILL_MODES",
    "FairshareConfig",
    "RunningJobs",
    "SimConfig",
    "SimResult",
    "Stepper",
    "simulate",
]


def __getattr__(name: str) -> Any:
    if name == "simulate":
        from hpcpolicy.sim.engine import simulate

        return simulate
    if name == "Stepper":
        from hpcpolicy.sim.compiled import Stepper

        return Stepper
    raise AttributeError(f"module 'hpcpolicy.sim' has no attribute {name!r}")
