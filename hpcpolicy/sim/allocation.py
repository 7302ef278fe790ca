"""What each job needs from each node group, and which group it is placed in.

The simulator counts four resources per node group: cores, GPUs, memory (MiB) and nodes.
Within a group they are pooled: a job fits when the group has enough of each in total. A job
runs inside one group (a GPU job on GPU nodes, say), never across groups. Under
``exclusive_nodes`` a job takes whole nodes — as many as its cores, GPUs, memory and node
request need — with every core and GPU on them, which is exactly RLScheduler's model of a
machine. Node-level placement (fragmentation inside a group) is not modelled by the first-fit
allocator; a topology-aware allocator can refine it behind the same interface.

An :class:`Allocator` turns the workload into a demand table (``need[job, group, resource]``,
-1 where a job can never run in a group) and picks the group for a job that is about to start.
The compiled engine implements the same first-fit rule on the same table; a test keeps both
engines identical.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import numpy as np
import numpy.typing as npt

from hpcpolicy.errors import ConfigError

if TYPE_CHECKING:
    from hpcpolicy.cluster import ClusterSpec

__all__ = [
    "CORES",
    "GPUS",
    "MEM",
    "NODES",
    "RESOURCES",
    "Allocator",
    "Demands",
    "FirstFit",
    "get_allocator",
]

I64 = npt.NDArray[np.int64]

CORES, GPUS, MEM, NODES = 0, 1, 2, 3
RESOURCES = ("cores", "gpus", "mem_mib", "nodes")
"""Names of the resource axis of :attr:`Demands.need` and :attr:`Demands.capacity`."""


@dataclass(frozen=True)
class Demands:
    """What every job needs in every node group.

    Example:
        >>> from hpcpolicy.cluster import ClusterSpec
        >>> import numpy as np
        >>> z = np.zeros(2, dtype=np.int64)
        >>> d = FirstFit().demands(np.array([4, 300]), z, z, z, ClusterSpec.homogeneous(256))
        >>> d.need[:, 0, 0].tolist(), d.never_fits.tolist()
        ([4, -1], [False, True])
    """

    need: I64
    """(jobs, groups, 4) int64: cores, GPUs, MiB and nodes a job holds while it runs in a group;
    -1 in every slot of a group where it can never run."""
    capacity: I64
    """(groups, 4) int64: the totals of each group."""
    never_fits: npt.NDArray[np.bool_]
    """(jobs,) True where no group can ever hold the job."""


class Allocator(Protocol):
    """Places jobs in node groups (first-fit now; best-fit and topology-aware later)."""

    @property
    def name(self) -> str:
        """Registry name."""
        ...

    def demands(self, procs: I64, nodes: I64, gpus: I64, mem_mib: I64, cluster: ClusterSpec,
                *, exclusive: bool = False) -> Demands:
        """The demand table of jobs with these requests on ``cluster``."""
        ...

    def pick(self, need: I64, free: I64) -> int:
        """The group a job with demand ``need`` (groups, 4) starts in, given ``free``
        (groups, 4); -1 when it fits nowhere now."""
        ...


@dataclass(frozen=True)
class FirstFit:
    """The first node group, in the cluster spec's order, where the job fits now."""

    name: str = "first-fit"

    def demands(self, procs: I64, nodes: I64, gpus: I64, mem_mib: I64, cluster: ClusterSpec,
                *, exclusive: bool = False) -> Demands:
        """Demand table; see :class:`Demands`."""
        procs, nodes, gpus, mem = (np.asarray(a, dtype=np.int64)
                                   for a in (procs, nodes, gpus, mem_mib))
        n, ngroups = len(procs), len(cluster.groups)
        need = np.empty((n, ngroups, 4), dtype=np.int64)
        capacity = np.empty((ngroups, 4), dtype=np.int64)
        placed = bool((nodes > 0).any())  # some jobs ask for a number of nodes
        for g, grp in enumerate(cluster.groups):
            capacity[g] = (grp.count * grp.cores, grp.count * grp.gpus,
                           grp.count * grp.mem_mib, grp.count)
            if exclusive:
                k = np.maximum(np.maximum(nodes, 1), _ceil_div(procs, grp.cores))
                if grp.gpus:
                    k = np.maximum(k, _ceil_div(gpus, grp.gpus))
                if grp.mem_mib:
                    k = np.maximum(k, _ceil_div(mem, grp.mem_mib))
                cols = (k * grp.cores, k * grp.gpus, k * grp.mem_mib, k)
            else:
                zero = np.zeros(n, dtype=np.int64)
                cols = (procs, gpus, mem if grp.mem_mib else zero, zero)
            for r, col in enumerate(cols):
                need[:, g, r] = col
            possible = ((cols[0] <= capacity[g, 0]) & (cols[1] <= capacity[g, 1])
                        & (cols[2] <= capacity[g, 2]) & (cols[3] <= capacity[g, 3]))
            if not grp.gpus:
                possible &= gpus == 0
            if placed and not exclusive:
                # A request for n nodes must fit on n nodes of this group; without a node
                # count (0) the job's cores may spread over any nodes.
                per_node = np.maximum(nodes, 1)
                possible &= (nodes == 0) | ((nodes <= grp.count)
                                            & (_ceil_div(procs, per_node) <= grp.cores)
                                            & (_ceil_div(gpus, per_node) <= grp.gpus))
            if not possible.all():
                need[~possible, g, :] = -1
        never = np.asarray(~(need[:, :, CORES] >= 0).any(axis=1))
        return Demands(need=need, capacity=capacity, never_fits=never)

    def pick(self, need: I64, free: I64) -> int:
        """First group where ``need`` (groups, 4) fits in ``free`` (groups, 4); -1 if none."""
        for g in range(need.shape[0]):
            if need[g, CORES] >= 0 and bool((need[g] <= free[g]).all()):
                return g
        return -1


def _ceil_div(a: I64, b: int | I64) -> I64:
    return np.asarray(-(-a // b), dtype=np.int64)


_ALLOCATORS: dict[str, type[FirstFit]] = {"first-fit": FirstFit}


def get_allocator(name: str) -> Allocator:
    """The allocator registered as ``name``.

    Raises:
        ConfigError: unknown name (the message lists the valid ones).
    """
    try:
        return _ALLOCATORS[name]()
    except KeyError:
        raise ConfigError(f"allocator {name!r} is not one of {', '.join(_ALLOCATORS)}") from None
