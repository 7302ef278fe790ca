"""The configuration model: what a site's slurm.conf (and sacctmgr dumps) say, typed.

Every value keeps the text it was written as and where (:class:`Source`): a change is
applied to the text and the typed view is read again from it (:mod:`.build`), so the same
checks run on a file and on a change, and the diff (:mod:`.answer`) knows which line to edit.

Durations are whole seconds, ``None`` where Slurm reads UNLIMITED; memory is MiB.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property

__all__ = ["Association", "NodeGroup", "NodeIndex", "Partition", "PriorityParameters", "Qos",
           "SchedulerParameters", "Setting", "SlurmConfig", "Source"]


@dataclass(frozen=True)
class Source:
    """Where a value was written: a file and the first of the ``span`` physical lines of its
    logical line (continued lines count), or a change (``line`` 0, ``file`` names it)."""

    file: str
    line: int
    span: int = 1

    def __str__(self) -> str:
        return f"{self.file}:{self.line}" if self.line else self.file


@dataclass(frozen=True)
class Setting:
    """One ``Key=Value`` as written: Slurm's spelling of the key, the value verbatim
    (quotes removed) and where it was written."""

    key: str
    value: str
    source: Source

    def where(self) -> str:
        """``file:line:Key``, the head of every message about this value."""
        return f"{self.source}:{self.key}"


@dataclass(frozen=True)
class PriorityParameters:
    """The multifactor priority plugin's parameters (slurm.conf(5), "PriorityWeight*")."""

    type: str = "priority/multifactor"
    """PriorityType: ``priority/multifactor`` (Slurm's default, read_config.h) or
    ``priority/basic`` (FIFO, older Slurm)."""
    weights: Mapping[str, int] = field(default_factory=dict)
    """Factor -> weight: Age, Assoc, Fairshare, JobSize, Partition, QOS (absent = 0)."""
    tres_weights: Mapping[str, float] = field(default_factory=dict)
    """PriorityWeightTRES, e.g. ``{"CPU": 1000, "Mem": 2000, "GRES/gpu": 3000}``."""
    decay_half_life_s: int | None = 7 * 86400
    """PriorityDecayHalfLife; 0 disables decay (Slurm's default is 7 days)."""
    max_age_s: int | None = 7 * 86400
    """PriorityMaxAge: the age at which the age factor reaches 1 (default 7 days)."""
    favor_small: bool = False
    """PriorityFavorSmall: the job size factor favours small jobs."""
    flags: tuple[str, ...] = ()
    """PriorityFlags, upper-cased (e.g. ``FAIR_TREE`` is the default since 19.05)."""


@dataclass(frozen=True)
class SchedulerParameters:
    """SchedulerType and the SchedulerParameters the backfill and main passes read
    (defaults from src/plugins/sched/backfill/backfill.c and src/slurmctld/job_scheduler.c)."""

    type: str = "sched/backfill"
    """SchedulerType: ``sched/backfill`` or ``sched/builtin``."""
    bf_interval_s: int = 30
    """bf_interval: seconds between backfill cycles (1..10800; -1 = only on events)."""
    bf_window_min: int = 1440
    """bf_window: how far ahead backfill plans, in minutes (1..43200)."""
    bf_resolution_s: int = 60
    """bf_resolution: the time step of the backfill plan, in seconds (1..3600)."""
    bf_max_job_test: int = 500
    """bf_max_job_test: jobs backfill considers per cycle (1..1000000)."""
    bf_max_job_user: int = 0
    """bf_max_job_user: jobs per user backfill considers per cycle (0 = no limit)."""
    bf_continue: bool = False
    """bf_continue: backfill resumes where it stopped after releasing its locks."""
    default_queue_depth: int = 100
    """default_queue_depth: jobs the main (event-driven) pass tries."""
    others: Mapping[str, str | None] = field(default_factory=dict)
    """Every other parameter, as written (a flag maps to None)."""


@dataclass(frozen=True)
class NodeGroup:
    """One ``NodeName=`` line with the ``NodeName=DEFAULT`` values in force above it."""

    names: tuple[str, ...]
    """The node names, host ranges expanded."""
    cpus: int
    """CPUs, else Boards x Sockets x CoresPerSocket x ThreadsPerCore (as Slurm)."""
    real_memory_mib: int
    """RealMemory (Slurm's default is 1)."""
    settings: Mapping[str, Setting]
    """Every key of the line and of the DEFAULT lines above it, by Slurm's spelling."""
    source: Source


@dataclass(frozen=True)
class NodeIndex:
    """The names a partition's ``Nodes=`` may use: every node defined, and NodeSets."""

    every: tuple[str, ...] = ()
    """Every node defined, in the order of the NodeName lines (``Nodes=ALL``)."""
    sets: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """NodeSet name -> its nodes."""

    @cached_property
    def known(self) -> frozenset[str]:
        """:attr:`every` as a set, built once."""
        return frozenset(self.every)


@dataclass(frozen=True)
class Partition:
    """One ``PartitionName=`` line with the ``PartitionName=DEFAULT`` values above it."""

    name: str
    nodes: tuple[str, ...]
    """Its nodes, host ranges expanded (``ALL`` is every node defined)."""
    default: bool
    state: str
    """UP, DOWN, DRAIN or INACTIVE."""
    max_time_s: int | None
    """MaxTime; None = UNLIMITED."""
    default_time_s: int | None
    """DefaultTime; None = the MaxTime."""
    max_nodes: int | None
    """MaxNodes; None = UNLIMITED."""
    priority_tier: int
    """PriorityTier (``Priority`` sets both it and PriorityJobFactor)."""
    priority_job_factor: int
    """PriorityJobFactor: the partition factor of multifactor priority."""
    qos: str | None
    """The partition QOS."""
    settings: Mapping[str, Setting]
    """Every key of the line and of the DEFAULT lines above it."""
    own: frozenset[str]
    """The keys written on the partition's own line (a change edits that line)."""
    source: Source


@dataclass(frozen=True)
class Qos:
    """One QOS of ``sacctmgr show qos -P``: its priority and limits, as written there."""

    name: str
    priority: int
    limits: Mapping[str, str]
    """Column (sacctmgr's long name, e.g. MaxJobsPerUser, GrpTRES, MaxWall) -> value."""
    source: Source


@dataclass(frozen=True)
class Association:
    """One row of ``sacctmgr show assoc -P``: an account (``user`` None) or a user in one."""

    cluster: str
    account: str
    user: str | None
    partition: str | None
    parent: str | None
    """The parent account: a user's is its account; an account's is ParentName when the
    dump has that column (``sacctmgr show assoc format=...,ParentName``), else None."""
    shares: str
    """Share (Fairshare): a number, or ``parent``."""
    limits: Mapping[str, str]
    """GrpTRES, MaxJobs, MaxSubmit, MaxWall, QOS, Def QOS ... as written."""
    source: Source


@dataclass(frozen=True)
class SlurmConfig:
    """A site's Slurm configuration (see :func:`hpcpolicy.slurmconf.read_slurm_conf`)."""

    settings: Mapping[str, Setting]
    """The whole-file keys by Slurm's spelling (a key written twice: the last, as Slurm)."""
    priority: PriorityParameters
    scheduler: SchedulerParameters
    nodes: tuple[NodeGroup, ...]
    partitions: Mapping[str, Partition]
    unknown: tuple[Setting, ...]
    """Keys Slurm does not know, kept as written (Slurm itself would stop on them)."""
    files: Mapping[str, str]
    """Every file read (the main one first) -> its text, for the diff."""
    node_index: NodeIndex = field(default_factory=NodeIndex)
    """The node names and NodeSets a partition's Nodes= is read against."""
    qos: Mapping[str, Qos] = field(default_factory=dict)
    associations: tuple[Association, ...] = ()

    @property
    def node_count(self) -> int:
        """How many nodes the configuration defines."""
        return len({n for group in self.nodes for n in group.names})
