"""GPU placement: the allocator registry (:mod:`hpcpolicy.gpu.registry`), node-level placement
of GPUs (first-available, best-fit, topology-aware), GPU sharing (FGD and the paper's other
allocators, a learned allocator), topology and speeds.

``simulate(..., SimConfig(allocator="topology-aware"))`` runs the node-level GPU engine,
:class:`hpcpolicy.sim.gpu_engine.GpuEngine`, which calls these; the cluster spec's
:class:`~hpcpolicy.cluster.GpuModel` sets distances, the penalty and speed sensitivity. The
package imports nothing itself, so naming an allocator (the registry) loads no numpy.
"""
