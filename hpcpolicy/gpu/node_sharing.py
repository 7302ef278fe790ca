"""GPU sharing on a cluster spec's nodes: where the node-level GPU engine puts each job when
``--allocator`` is a sharing allocator (``fgd``, ``bestfit``, ..., or a learned one's folder).

Each job is placed as Kubernetes places a pod in Weng et al.'s model (USENIX ATC 2023): on
one node, taking its cores (as CPU thousandths), its memory, and ``gpus`` GPUs of
``gpu_share`` thousandths each (a share under 1,000 is part of one GPU). The node's CPU, its
memory and every GPU's thousandths bind; nothing is overcommitted. The allocators and the
state are the compiled ones of the inflation experiment (:mod:`hpcpolicy.gpu.cluster_state`),
so the engine, the inflation experiment and the time-based replay place a pod alike.

Choices made here, where an HPC job table and the pod model differ:

* the nodes are the spec's groups expanded in order (:class:`~hpcpolicy.gpu.topology.Topology`);
  a node's GPU model is its pool, and a job may run on any model (as with the node-level
  allocators: its logged GPU type sets only its speed factor);
* a job asking for more than one node, or for more than any empty node holds, never fits
  (reported as such, not shrunk);
* a node whose group gives no memory does not bind memory;
* FGD's target workload is the workload's own typical shapes
  (:func:`~hpcpolicy.gpu.fragmentation.typical_pods`);
* ``random`` draws from a generator seeded with 0, so a replay is deterministic.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from hpcpolicy.cluster import ClusterSpec
from hpcpolicy.errors import ConfigError
from hpcpolicy.gpu.allocators import N_FEATURES
from hpcpolicy.gpu.cluster_state import apply, choose, new_state
from hpcpolicy.gpu.fragmentation import typical_pods
from hpcpolicy.gpu.inflation import pod_shapes, typical_tuple
from hpcpolicy.gpu.sharing import GPU_MILLI, MAX_GPUS, SharingNodes, SharingPods
from hpcpolicy.gpu.sharing_code import sharing_code
from hpcpolicy.gpu.topology import Topology
from hpcpolicy.workload import Workload

__all__ = ["NodeSharing"]

I64 = npt.NDArray[np.int64]
B = npt.NDArray[np.bool_]

_UNBOUND_MEM = 2**40
"""Memory (MiB) of a node whose group gives none: more than any job asks."""


def _nodes(cluster: ClusterSpec, topo: Topology) -> SharingNodes:
    """The spec's nodes as the sharing allocators see them.

    Raises:
        ConfigError: a node holds more GPUs than the sharing allocators handle.
    """
    groups = cluster.groups
    wide = [g.name for g in groups if g.gpus > MAX_GPUS]
    if wide:
        raise ConfigError(f"cluster {cluster.name!r}: group {wide[0]!r} has nodes of more than "
                          f"{MAX_GPUS} GPUs, the most a sharing allocator handles; use a "
                          "node-level allocator (best-fit, ...)")
    g = topo.node_group
    cores = np.array([grp.cores for grp in groups], dtype=np.int64)[g]
    mem = np.array([grp.mem_mib or _UNBOUND_MEM for grp in groups], dtype=np.int64)[g]
    gpus = np.array([grp.gpus for grp in groups], dtype=np.int64)[g]
    model = np.where(gpus > 0, topo.node_pool, -1)
    names = tuple(f"{groups[k].name}-{i}" for i, k in enumerate(g.tolist()))
    return SharingNodes(names, cores * 1000, mem, gpus, model, topo.pool_names)


def _pods(workload: Workload, shares: I64, models: int) -> SharingPods:
    """The jobs as pods: CPU thousandths, memory, GPUs and thousandths of each.

    Raises:
        ConfigError: a job shares parts of several GPUs.
    """
    gpus = np.asarray(workload.gpus, dtype=np.int64)
    milli = np.where(gpus > 0, shares, 0)
    split = np.flatnonzero((gpus > 1) & (milli < GPU_MILLI))
    if split.size:
        j = int(split[0])
        raise ConfigError(f"job {workload.job_id[j]}: {gpus[j]} GPUs of {milli[j]} thousandths "
                          "each; a sharing allocator shares one GPU at most, so use a "
                          "node-level allocator for this workload")
    n = len(gpus)
    return SharingPods(tuple(map(str, np.asarray(workload.job_id))),
                       np.asarray(workload.procs, dtype=np.int64) * 1000,
                       np.asarray(workload.mem_mib, dtype=np.int64), gpus, milli,
                       np.ones((n, models), dtype=bool))


class NodeSharing:
    """The sharing allocator's state over one replay: :meth:`choose`, :meth:`hold`,
    :meth:`release`.

    Example:
        >>> from hpcpolicy.cluster import NodeGroup
        >>> z = np.zeros(2, dtype=np.int64)
        >>> w = Workload(job_id=np.array(["a", "b"], dtype=object), submit=z,
        ...     run_time=np.array([9, 9]), req_walltime=np.array([9, 9]),
        ...     procs=np.array([2, 2]), nodes=z + 1, gpus=np.array([1, 1]), mem_mib=z,
        ...     user=z.astype(np.int32), partition=z.astype(np.int32), logged_start=z - 1,
        ...     gpu_share=np.array([500, 500]))
        >>> spec = ClusterSpec((NodeGroup("g", 2, 8, gpus=2, gpu_type="t4"),))
        >>> s = NodeSharing(w, spec, Topology.from_cluster(spec), "fgd", np.array([500, 500]))
        >>> node, mask = s.choose(0, None)
        >>> s.hold(0, node, mask); s.choose(1, None)[0] == node
        True
    """

    def __init__(self, workload: Workload, cluster: ClusterSpec, topo: Topology,
                 allocator: str, shares: I64) -> None:
        self.code, weights = sharing_code(allocator)
        self.weights = np.asarray(weights or (0.0,) * N_FEATURES, dtype=np.float64)
        self.nodes = _nodes(cluster, topo)
        self.pods = _pods(workload, shares, len(topo.pool_names))
        self.topo = topo
        self.spec = pod_shapes(self.pods) if len(self.pods.cpu) else np.zeros(0, np.int64)
        self.typical = typical_tuple(typical_pods(self.pods))
        n_specs = int(self.spec.max()) + 1 if len(self.spec) else 1
        nd = self.nodes
        self.state = new_state(nd.cpu, nd.mem, nd.gpus, nd.model, self.typical, n_specs)
        self.draws = np.random.default_rng(0).random((len(self.spec), 2))
        self.everywhere = np.ones(len(nd.cpu), dtype=bool)
        self.held: dict[int, tuple[int, int]] = {}

    def never_fits(self, one_node: B) -> B:
        """(jobs,) true for a job no empty node can hold, or (``~one_node``) asking for more
        than one node."""
        p, nd = self.pods, self.nodes
        fit = ((p.cpu[:, None] <= nd.cpu[None]) & (p.mem[:, None] <= nd.mem[None])
               & (p.num_gpu[:, None] <= nd.gpus[None]))
        return np.asarray(~fit.any(axis=1) | ~one_node)

    def choose(self, j: int, pool: int | None) -> tuple[int, int] | None:
        """The node and GPU bit mask the allocator gives job ``j`` now (on a node of ``pool``,
        or anywhere for None), or None when no node can take it."""
        p, nd = self.pods, self.nodes
        usable = self.everywhere if pool is None else self.topo.node_pool == pool
        node, mask = choose(self.code, self.state, nd.cpu, nd.mem, nd.gpus, nd.model,
                            self.typical, self.weights, int(p.cpu[j]), int(p.mem[j]),
                            int(p.num_gpu[j]), int(p.gpu_milli[j]), p.allowed[j], usable,
                            int(self.spec[j]), float(self.draws[j, 0]),
                            float(self.draws[j, 1]))
        return None if node < 0 else (int(node), int(mask))

    def _apply(self, j: int, node: int, mask: int, sign: int) -> None:
        p, nd = self.pods, self.nodes
        apply(self.state, nd.gpus, nd.model, self.typical, node, int(p.cpu[j]), int(p.mem[j]),
              int(p.num_gpu[j]), int(p.gpu_milli[j]), mask, sign)

    def hold(self, j: int, node: int, mask: int) -> None:
        """Place job ``j`` on ``node``'s GPUs ``mask`` (a choice of :meth:`choose`)."""
        self._apply(j, node, mask, 1)
        self.held[j] = (node, mask)

    def release(self, j: int) -> None:
        """Give back what job ``j`` holds."""
        node, mask = self.held.pop(j)
        self._apply(j, node, mask, -1)

    def gpu_milli(self, j: int) -> int:
        """GPU thousandths job ``j`` holds in all."""
        return int(self.pods.num_gpu[j] * self.pods.gpu_milli[j])
