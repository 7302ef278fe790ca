"""A learned (or any) allocator's hook into the GPU engine: choose one candidate placement.

When a job is about to start, the engine lists its candidate placements: for every pool
(GPU type) whose free totals hold the job, the placement each node-level heuristic
(first-available, best-fit, topology-aware) proposes there, duplicates dropped. A
:class:`Placer` picks one by index. Without a placer the engine takes the first pool and
the allocator named in the configuration, exactly as before.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    from hpcpolicy.cluster import ClusterSpec
    from hpcpolicy.gpu.topology import Topology
    from hpcpolicy.workload import Workload

__all__ = ["Candidate", "PlacementView", "Placer", "PlacerPolicy"]

I64 = npt.NDArray[np.int64]


@dataclass(frozen=True)
class Candidate:
    """One way to place a job."""

    pool: int
    """Pool (GPU type) index in :class:`~hpcpolicy.gpu.topology.Topology`."""
    take: I64
    """GPU thousandths taken from each node of the pool (the pool's nodes, in spec order)."""
    allocator: str
    """The heuristic that proposed it (the first one, when several proposed the same)."""
    nodes: int
    """Nodes the job's GPUs would be on."""
    racks: int
    """Racks they would be in."""
    distance: float
    """Largest distance between two of its GPUs (:class:`~hpcpolicy.cluster.GpuModel`)."""
    speed_factor: float
    """Run-time factor from GPU speeds in this pool (1 = as fast as logged)."""


@dataclass(frozen=True)
class PlacementView:
    """What a placer sees when one job is about to start."""

    now: int
    """Simulated time (s since the workload's origin)."""
    job: int
    """Index of the job in the workload."""
    workload: Workload
    """The workload; placers read only its submit-time columns."""
    candidates: tuple[Candidate, ...]
    """At least one candidate."""
    node_free: I64
    """(nodes,) free GPU thousandths of every node now (a copy)."""
    pool_free: I64
    """(pools, 4) free cores, GPU thousandths, MiB and nodes of every pool now (a copy)."""
    topology: Topology
    """The cluster's nodes, racks and pools."""


@runtime_checkable
class Placer(Protocol):
    """Chooses among a job's candidate placements."""

    def choose(self, view: PlacementView) -> int:
        """Index into ``view.candidates``."""
        ...


@runtime_checkable
class PlacerPolicy(Protocol):
    """A policy that also places GPUs (the two-agent scheduler, the DQN type chooser)."""

    def bind_placer(self, workload: Workload, cluster: ClusterSpec) -> Placer:
        """A placer for one run."""
        ...
