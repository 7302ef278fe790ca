"""GPU partitions: node-level placement of GPUs (first-available, best-fit, topology-aware),
GPU speeds and the spread penalty, and the GPU metrics of a run.

``simulate(..., SimConfig(allocator="topology-aware"))`` runs :class:`GpuEngine`; the cluster
spec's :class:`~hpcpolicy.cluster.GpuModel` sets distances, the penalty and speed sensitivity.
"""

from hpcpolicy.gpu.engine import GpuEngine
from hpcpolicy.gpu.placement import NODE_ALLOCATORS, get_node_allocator
from hpcpolicy.gpu.placer import Candidate, PlacementView, Placer, PlacerPolicy
from hpcpolicy.gpu.topology import MILLI, Topology

__all__ = ["MILLI", "NODE_ALLOCATORS", "Candidate", "GpuEngine", "PlacementView", "Placer",
           "PlacerPolicy", "Topology", "get_node_allocator"]
