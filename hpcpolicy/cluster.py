"""ClusterSpec: the machine a workload is replayed on.

A cluster is a list of node groups; each group has a number of identical nodes with cores,
memory and GPUs of one type, and the rack the group sits in. The simplest spec, used for SWF
logs, is one group of ``procs`` single-core nodes or ``nodes`` nodes of ``procs / nodes``
cores (from the SWF header's MaxProcs / MaxNodes, or ``--procs``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from hpcpolicy.config import Config
from hpcpolicy.errors import ConfigError

__all__ = ["ClusterSpec", "GpuModel", "NodeGroup"]


@dataclass(frozen=True)
class NodeGroup(Config):
    """A set of identical nodes."""

    label: ClassVar[str] = "node group"

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
    """Speed of this GPU type relative to the reference type. The node-level GPU allocators
    (:mod:`hpcpolicy.gpu`) scale a GPU job's run time by the speed of the type it ran on in the
    log over the speed of the type it gets (see :class:`GpuModel`); the pooled ``first-fit``
    allocator replays logged run times as they are."""
    rack: str | None = None
    """Rack name, for topology-aware allocation."""
    nodes: str | None = None
    """The group's node names in Slurm's hostlist form (``n[1-4]``), as many as
    :attr:`count`; read by the Slurm flavour of the replay (:mod:`hpcpolicy.slurm.layout`)."""

    def validate(self) -> None:
        self._at_least(1, "count", "cores")
        self._at_least(0, "mem_mib", "gpus")
        self._require(self.gpu_speed > 0, "gpu_speed", f"must be > 0, got {self.gpu_speed}")


@dataclass(frozen=True)
class GpuModel(Config):
    """How placement changes a GPU job's run time under the node-level allocators.

    Distances between two GPUs of one job: 0 on the same node, :attr:`same_rack` on two nodes
    of one rack, :attr:`cross_rack` in two racks. A job spread over nodes runs
    ``1 + spread_penalty * D`` times longer, where ``D`` is the largest distance between two
    of its GPUs (off by default: ``spread_penalty = 0``).

    A GPU job that ran on type ``a`` in the log and gets type ``b`` runs
    ``(speed(a) / speed(b)) ** s`` times as long, where ``s`` is the speed sensitivity of its
    class (its partition): 1 for a job bound by the GPU, 0 for one the GPU does not limit.
    A logged type the spec does not know (or none) counts as speed 1.

    Example:
        >>> m = GpuModel(spread_penalty=0.1, partition_sensitivity=(("infer", 0.5),))
        >>> m.sensitivity_of("infer"), m.sensitivity_of("train")
        (0.5, 1.0)
    """

    label: ClassVar[str] = "gpu model"

    same_rack: float = 1.0
    """Distance between GPUs on two nodes of one rack."""
    cross_rack: float = 2.0
    """Distance between GPUs in two racks."""
    spread_penalty: float = 0.0
    """Run-time slowdown per unit of a job's largest GPU distance; 0 turns it off."""
    sensitivity: float = 1.0
    """Speed sensitivity of jobs whose partition is not in :attr:`partition_sensitivity`."""
    partition_sensitivity: tuple[tuple[str, float], ...] = ()
    """(partition, sensitivity) pairs for job classes that differ from the default."""

    def validate(self) -> None:
        self._at_least(0, "same_rack", "cross_rack", "spread_penalty", "sensitivity")
        self._require(self.cross_rack >= self.same_rack, "cross_rack", "must be >= same_rack "
                      "(GPUs in two racks are not closer than GPUs in one)")
        for part, value in self.partition_sensitivity:
            self._require(value >= 0, "partition_sensitivity",
                          f"sensitivity of partition {part!r} must be >= 0, got {value}")

    def sensitivity_of(self, partition: str) -> float:
        """Speed sensitivity of a job in ``partition``."""
        return dict(self.partition_sensitivity).get(partition, self.sensitivity)


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
    gpu: GpuModel = field(default_factory=GpuModel)
    """Distances, spread penalty and speed sensitivity for the node-level GPU allocators."""
    partitions: tuple[tuple[str, tuple[str, ...]], ...] = ()
    """(partition, its members): group names and node names (the spec's hostlist expanded),
    as in slurm.conf's ``PartitionName=... Nodes=...``; read by the Slurm flavour of the replay
    (``--compat slurm``). Empty: that replay infers them from the log."""

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
        """``procs`` cores, on ``nodes`` nodes if given (as equal as the totals allow), else one
        core per node.

        Example:
            >>> ClusterSpec.homogeneous(256).total_cores
            256
        """
        if nodes is None or nodes < 1 or nodes > procs:
            return cls((NodeGroup("cpu", procs, 1),), name=name, source=source)
        per, extra = divmod(procs, nodes)
        if not extra:
            return cls((NodeGroup("cpu", nodes, per),), name=name, source=source)
        # not a multiple: the header's node count, nodes as equal as the totals allow
        return cls((NodeGroup("cpu", extra, per + 1), NodeGroup("cpu-small", nodes - extra, per)),
                   name=name, source=source,
                   notes=(f"{procs} processors is not a multiple of {nodes} nodes: replayed on "
                          f"{extra} nodes of {per + 1} and {nodes - extra} of {per} processors",))
