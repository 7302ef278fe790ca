"""GPU partitions: node-level placement of GPUs (first-available, best-fit, topology-aware),
GPU speeds and the spread penalty, and the GPU metrics of a run.

``simulate(..., SimConfig(allocator="topology-aware"))`` runs the node-level GPU engine,
:class:`hpcpolicy.sim.gpu_engine.GpuEngine`, which calls these; the cluster spec's
:class:`~hpcpolicy.cluster.GpuModel` sets distances, the penalty and speed sensitivity.
"""

from hpcpolicy.gpu.placement import NODE_ALLOCATORS, get_node_allocator
from hpcpolicy.gpu.placer import Candidate, PlacementView, Placer, PlacerPolicy
from hpcpolicy.gpu.topology import MILLI, Topology

__all__ = ["MILLI", "NODE_ALLOCATORS", "Candidate", "PlacementView", "Placer",
           "PlacerPolicy", "Topology", "get_node_allocator"]
