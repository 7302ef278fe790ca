"""ClusterSpec: the machine a workload is replayed on.

A cluster is a list of node groups; each group has a number of identical nodes with cores,
memory and GPUs of one type, and the rack the group sits in. The simplest spec, used for SWF
logs, is one group of ``procs`` single-core nodes or ``nodes`` nodes of ``procs / nodes``
cores (from the SWF header's MaxProcs / MaxNodes, or ``--procs``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hpcpolicy.errors import ConfigError

__all__ = ["ClusterSpec", "NodeGroup"]


@dataclass(frozen=True)
class NodeGroup:
    """A set of identical nodes."""

    name: str
    """Group name, e.g. ``cpu`` or ``a100``."""
    count: int
    """Number of nodes."""
    cores: int
    """Cores per node."""
    mem_mib: int = 0
    """Memory per node in MiB (0 = memory is not modelled)."""
    gpus: int = 0
    """GPUs per node."""
    gpu_type: str | None = None
    """GPU type name (a100, v100, ...), None for CPU nodes."""
    gpu_speed: float = 1.0
    """Speed of this GPU type relative to the reference type (run times scale by 1/speed).
    Reserved for the GPU-aware engine: the current simulator replays logged run times as they
    are, whatever the group's speed."""
    rack: str | None = None
    """Rack name, for topology-aware allocation."""

    def __post_init__(self) -> None:
        for name in ("count", "cores"):
            if getattr(self, name) < 1:
                raise ConfigError(f"node group {self.name!r}: {name} must be >= 1")
        for name in ("mem_mib", "gpus"):
            if getattr(self, name) < 0:
                raise ConfigError(f"node group {self.name!r}: {name} must be >= 0")
        if self.gpu_speed <= 0:
            raise ConfigError(f"node group {self.name!r}: gpu_speed must be > 0")


@dataclass(frozen=True)
class ClusterSpec:
    """The whole machine."""

    groups: tuple[NodeGroup, ...]
    """Node groups; at least one."""
    name: str = "cluster"
    """Name shown in reports."""
    source: str = "explicit"
    """Where the spec came from: a file path, ``swf-header``, ``--procs``, ``inferred``."""
    notes: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        if not self.groups:
            raise ConfigError(f"cluster {self.name!r} has no node groups")

    @property
    def total_cores(self) -> int:
        """Cores in the whole cluster."""
        return sum(g.count * g.cores for g in self.groups)

    @property
    def total_nodes(self) -> int:
        """Nodes in the whole cluster."""
        return sum(g.count for g in self.groups)

    @property
    def total_gpus(self) -> int:
        """GPUs in the whole cluster."""
        return sum(g.count * g.gpus for g in self.groups)

    @classmethod
    def homogeneous(cls, procs: int, nodes: int | None = None, *, source: str = "explicit",
                    name: str = "cluster") -> ClusterSpec:
        """``procs`` cores, on ``nodes`` equal nodes if given, else one core per node.

        Example:
            >>> ClusterSpec.homogeneous(256).total_cores
            256
        """
        if nodes is None or nodes < 1 or procs % nodes:
            return cls((NodeGroup("cpu", procs, 1),), name=name, source=source)
        return cls((NodeGroup("cpu", nodes, procs // nodes),), name=name, source=source)
