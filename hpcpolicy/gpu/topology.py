"""The node-level view of a cluster that the GPU allocators place jobs on.

A *pool* is every node with one GPU type (all CPU-only nodes form one pool too), in the
order the types first appear in the cluster spec. Inside a pool, cores and memory are
counted in total, as the pooled simulator counts them; GPUs are counted per node, in
thousandths of a GPU (a job using 0.46 of a GPU holds 460 on one node). A job runs in one
pool; its GPUs may lie on several nodes and racks of that pool, which is what the
allocators choose and what the spread penalty charges for.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from hpcpolicy.cluster import ClusterSpec, GpuModel, NodeGroup
from hpcpolicy.errors import ConfigError

__all__ = ["MILLI", "Topology"]

MILLI = 1000
"""Thousandths of a GPU in one GPU."""

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Topology:
    """Nodes, racks and GPU pools of a cluster.

    Example:
        >>> from hpcpolicy.cluster import NodeGroup
        >>> spec = ClusterSpec((NodeGroup("a", 2, 8, gpus=4, gpu_type="a100", rack="r1"),
        ...                     NodeGroup("b", 1, 8, gpus=4, gpu_type="a100", rack="r2"),
        ...                     NodeGroup("c", 1, 8)))
        >>> t = Topology.from_cluster(spec)
        >>> t.pool_names, t.node_pool.tolist(), t.node_rack.tolist()
        (('a100', 'cpu'), [0, 0, 0, 1], [0, 0, 1, 2])
    """

    pool_names: tuple[str, ...]
    """GPU type of each pool; ``cpu`` for the pool of nodes without GPUs."""
    pool_speed: F64
    """(pools,) speed of each pool's GPU type (1 for the CPU pool)."""
    node_pool: I64
    """(nodes,) the pool of each node."""
    node_group: I64
    """(nodes,) the cluster-spec group of each node."""
    node_rack: I64
    """(nodes,) rack code of each node (nodes of groups without a rack share one code)."""
    node_gpu_milli: I64
    """(nodes,) GPU capacity of each node in thousandths."""
    pool_capacity: I64
    """(pools, 4) cores, GPU thousandths, MiB and nodes of each pool."""
    racks: tuple[str, ...]
    """Rack names by code (``-`` for groups without a rack)."""
    model: GpuModel
    """Distances, spread penalty and speed sensitivity."""

    @classmethod
    def from_cluster(cls, spec: ClusterSpec) -> Topology:
        """Expand the spec's groups into nodes and pools.

        Raises:
            ConfigError: two groups of one GPU type give it different speeds.
        """
        names: list[str] = []
        speeds: dict[str, float] = {}
        racks: list[str] = []
        pool, group, rack, milli = [], [], [], []
        for g, grp in enumerate(spec.groups):
            name = _pool_name(grp)
            speed = grp.gpu_speed if grp.gpus else 1.0
            if name not in speeds:
                names.append(name)
                speeds[name] = speed
            elif speeds[name] != speed:
                raise ConfigError(
                    f"cluster {spec.name!r}: GPU type {name!r} has speed {speeds[name]} in one "
                    f"group and {speed} in group {grp.name!r}; one type has one speed (give "
                    "different cards different gpu_type names)")
            rack_name = grp.rack or "-"
            if rack_name not in racks:
                racks.append(rack_name)
            pool += [names.index(name)] * grp.count
            group += [g] * grp.count
            rack += [racks.index(rack_name)] * grp.count
            milli += [grp.gpus * MILLI] * grp.count
        capacity = np.zeros((len(names), 4), dtype=np.int64)
        for grp in spec.groups:
            p = names.index(_pool_name(grp))
            capacity[p] += (grp.count * grp.cores, grp.count * grp.gpus * MILLI,
                            grp.count * grp.mem_mib, grp.count)
        return cls(
            pool_names=tuple(names),
            pool_speed=np.array([speeds[n] for n in names], dtype=np.float64),
            node_pool=np.array(pool, dtype=np.int64),
            node_group=np.array(group, dtype=np.int64),
            node_rack=np.array(rack, dtype=np.int64),
            node_gpu_milli=np.array(milli, dtype=np.int64),
            pool_capacity=capacity,
            racks=tuple(racks),
            model=spec.gpu,
        )

    def pool_nodes(self, pool: int) -> I64:
        """Indices of the nodes of ``pool``, in spec order."""
        return np.flatnonzero(self.node_pool == pool)

    def spread_distance(self, nodes: I64) -> float:
        """Largest distance between two GPUs on ``nodes`` (the nodes one job's GPUs are on)."""
        if len(nodes) <= 1:
            return 0.0
        if len(np.unique(self.node_rack[nodes])) > 1:
            return self.model.cross_rack
        return self.model.same_rack


def _pool_name(group: NodeGroup) -> str:
    """The pool a group's nodes belong to: their GPU type, or ``cpu``."""
    return (group.gpu_type or "gpu") if group.gpus else "cpu"
