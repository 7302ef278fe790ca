"""Replay a workload in a :class:`~.model.SlurmWorld` (skeleton: the compiled loop lands
next)."""

from __future__ import annotations

from hpcpolicy.errors import SimulationError
from hpcpolicy.sim.types import SimResult
from hpcpolicy.workload import Workload
from hpcpolicy.world.slurm.model import SlurmWorld

__all__ = ["replay"]


def replay(workload: Workload, world: SlurmWorld) -> SimResult:
    """The starts of ``workload``'s jobs as Slurm, configured as ``world`` says, would give.

    Raises:
        SimulationError: the world was built for another workload.
    """
    if world.jobs != len(workload):
        raise SimulationError(f"slurm world: built for {world.jobs} jobs, the workload has "
                              f"{len(workload)}; build it with slurm_world(conf, workload)")
    raise SimulationError("slurm world: the replay is not built yet (skeleton)")
