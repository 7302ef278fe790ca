"""Capacity over time: outages and drains that take resources away and give them back.

An :class:`Outage` is an interval ``[start, end)`` (seconds since the workload's origin) during
which ``cores`` cores and ``nodes`` whole nodes of one node group are out of service. The
engines (compiled, reference, the Slurm flavour, the GPU engine) replay it with these
semantics:

* **At its start** the group's free resources drop by the outage's size, at once. Jobs running
  on them are left to finish: the free count may go below zero, meaning that no new job starts
  in that group until finishing jobs have paid the debt back (capacity is taken as it frees).
* **At its end** the resources come back.
* **At equal times** finishes, capacity changes and submits are all applied before the
  scheduling pass (they only add to or take from the free count, so their order does not
  matter); a change alone also triggers a pass.
* **Planning does not see it coming** (an *unplanned* outage, the only kind replayed): EASY's
  shadow time and the conservative profile start from the free resources as they are now and
  know neither a future outage nor when a current one ends. A head that cannot fit even once
  every running job has ended gets no reservation (every job that fits may start), and a
  conservative reservation is only made where a job fits. A *planned* reservation (maintenance
  announced ahead, which backfilling would plan around) is not modelled.
* **EASY's promise to the head** is void across a change, as it is when a job overruns its
  request: the ``check`` invariants do not flag a reservation that an outage moved.

Example:
    >>> from hpcpolicy.cluster import ClusterSpec
    >>> changes(ClusterSpec.homogeneous(8), (Outage(start=10, end=50, cores=3),)).tolist()
    [[10, 50], [0, 0], [-3, 3], [0, 0], [0, 0], [0, 0]]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import numpy.typing as npt

from hpcpolicy.cluster import ClusterSpec
from hpcpolicy.config import Config
from hpcpolicy.errors import ConfigError

__all__ = ["G", "Outage", "T", "changes", "group_index"]

I64 = npt.NDArray[np.int64]

T, G = 0, 1
"""Rows of :func:`changes`: the time, the group; rows 2-5 the change of cores, GPUs, MiB and
nodes (negative: taken away)."""


@dataclass(frozen=True)
class Outage(Config):
    """Resources of one node group out of service on ``[start, end)`` (unplanned).

    Example:
        >>> Outage(start=0, end=3600, nodes=2, group="cpu").nodes
        2
    """

    label: ClassVar[str] = "outage"

    start: int
    """When the resources go (s since the workload's origin)."""
    end: int
    """When they come back (s since the origin); after ``start``."""
    cores: int = 0
    """Cores out of service (beyond those of :attr:`nodes`)."""
    nodes: int = 0
    """Whole nodes out of service: their cores, GPUs and memory."""
    group: str = ""
    """Name of the node group; empty = the cluster's first group."""

    def validate(self) -> None:
        self._at_least(0, "cores", "nodes")
        self._require(self.end > self.start, "end",
                      f"must be after start ({self.start} s), got {self.end} s")
        self._require(self.cores + self.nodes > 0, "cores",
                      "an outage takes at least one core or node; set cores or nodes")


def group_index(cluster: ClusterSpec, outage: Outage) -> int:
    """Index of the outage's node group in ``cluster``.

    Raises:
        ConfigError: the cluster has no group of that name (the message lists them).
    """
    names = [g.name for g in cluster.groups]
    if not outage.group:
        return 0
    if outage.group not in names:
        raise ConfigError(f"outage at t={outage.start} s names node group {outage.group!r}, "
                          f"which cluster {cluster.name!r} lacks (it has {', '.join(names)}); "
                          "fix the outage's group")
    return names.index(outage.group)


def changes(cluster: ClusterSpec, outages: tuple[Outage, ...]) -> I64:
    """The outages as (6, K) capacity changes sorted by time: two per outage (taken at its
    start, given back at its end), rows :data:`T`, :data:`G`, then the change of the group's
    cores, GPUs, MiB and nodes.

    Raises:
        ConfigError: an outage names an unknown group or more than the group holds.
    """
    cols = []
    for o in outages:
        g = group_index(cluster, o)
        grp = cluster.groups[g]
        size = (o.cores + o.nodes * grp.cores, o.nodes * grp.gpus, o.nodes * grp.mem_mib,
                o.nodes)
        if size[0] > grp.count * grp.cores or o.nodes > grp.count:
            raise ConfigError(f"outage at t={o.start} s takes {size[0]} cores and {o.nodes} "
                              f"nodes of group {grp.name!r}, which has {grp.count * grp.cores} "
                              f"cores on {grp.count} nodes; shrink the outage")
        cols.append((o.start, g, *(-x for x in size)))
        cols.append((o.end, g, *size))
    table = np.array(cols, dtype=np.int64).reshape(-1, 6).T
    return np.ascontiguousarray(table[:, np.argsort(table[T], kind="stable")])
