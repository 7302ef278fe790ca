"""Inputs and outputs of one simulation run (the contract between engine, metrics and CLI)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from hpcpolicy.compat import COMPAT_NAMES, CompatPreset, compat_preset
from hpcpolicy.config import Config, choice
from hpcpolicy.errors import ConfigError
from hpcpolicy.gpu.registry import ALLOCATORS, check_allocator
from hpcpolicy.policies.settings import FairshareConfig
from hpcpolicy.sim.capacity import Outage

__all__ = [
    "ALLOCATORS",
    "BACKFILL_MODES",
    "ENGINES",
    "RunLimits",
    "RunningJobs",
    "SimConfig",
    "SimResult",
]

BACKFILL_MODES = ("none", "easy", "conservative")
ENGINES = ("fast", "reference")
# ALLOCATORS, the allocator names, come from the one registry, hpcpolicy.gpu.registry.

I64 = npt.NDArray[np.int64]



@dataclass(frozen=True)
class RunLimits(Config):
    """Running limits per user, as a site enforces them (Slurm ``MaxJobsPerUser``,
    ``MaxTRESPerUser=cpu=N``): a job whose user is at a limit waits without holding a
    reservation, and the scheduler looks past it. Compiled engine only.

    Example:
        >>> RunLimits(user_jobs=8).active
        True
    """

    label: ClassVar[str] = "limits"

    user_jobs: int = 0
    """Most jobs one user may have running at once; 0 = no limit."""
    user_cores: int = 0
    """Most cores one user may hold at once; 0 = no limit. A user with nothing running may
    start one larger job (rather than hold it forever)."""

    def validate(self) -> None:
        self._at_least(0, "user_jobs", "user_cores")

    @property
    def active(self) -> bool:
        """Whether any limit is set."""
        return self.user_jobs > 0 or self.user_cores > 0


@dataclass(frozen=True)
class SimConfig(Config):
    """How to replay a workload.

    Example:
        >>> SimConfig(policy="sjf", backfill="easy").backfill
        'easy'
    """

    label: ClassVar[str] = "sim"

    policy: str = "fcfs"
    """Name of a registered policy (see ``hpcpolicy.policies``)."""
    backfill: str = choice("none", BACKFILL_MODES)
    """none, easy or conservative."""
    kill_at_limit: bool = False
    """End a job at its requested walltime when its logged run time is longer."""
    compat: str | None = choice(None, COMPAT_NAMES)
    """Engine semantics of a peer (``rlscheduler``) instead of the project's own; see README."""
    check: bool = False
    """Check invariants while running (capacity, start >= submit, once-only starts, ...)."""
    engine: str = choice("fast", ENGINES)
    """fast (compiled) or reference (plain Python); both give identical schedules. The
    ``rlscheduler`` semantics have one (compiled) implementation, used for either."""
    exclusive_nodes: bool = False
    """Jobs occupy whole nodes: max(requested nodes, ceil(procs / cores per node), ...) nodes,
    with all their cores and GPUs (RLScheduler's model; Slurm ``--exclusive``)."""
    allocator: str = "first-fit"
    """Which node group a job is placed in; ``first-fit``: the first group (in the cluster
    spec's order) where it fits now. The node-level allocators also choose the nodes a job's
    GPUs are on, the sharing ones (and a learned allocator's folder) the node and GPUs of a
    job on one node (:mod:`hpcpolicy.gpu.registry` lists them all)."""
    fairshare: FairshareConfig = field(default_factory=FairshareConfig)
    """Parameters of the ``fairshare`` policy (unused by the others)."""
    limits: RunLimits = field(default_factory=RunLimits)
    """Running limits per user (a site model's; none by default)."""
    pools: tuple[tuple[str, tuple[str, ...]], ...] = ()
    """Partitions with their own nodes: (partition name, names of the node groups its jobs
    may run in); the name ``*`` stands for every partition not named. Jobs of partitions
    not covered run in any group; empty = no pools."""
    outages: tuple[Outage, ...] = ()
    """Capacity taken away and given back over time (unplanned outages and drains, see
    :mod:`hpcpolicy.sim.capacity`); empty = the whole machine all the time."""

    def validate(self) -> None:
        check_allocator(self.allocator)
        self._require(self.preset.conservative_backfill or self.backfill != "conservative",
                      "backfill", f"compat {self.compat!r} has no conservative backfilling; "
                      "use --backfill none or easy with it, or drop --compat")
        self._require(not self.limits.active or (
            self.engine == "fast" and not self.preset.peer_engine
            and self.allocator == "first-fit"), "limits",
            "running limits need the fast engine with the project's semantics and the "
            "first-fit allocator; drop --engine reference, --compat or the node-level "
            "--allocator, or the site model's [limits]")
        self._require(not self.outages or not self.preset.peer_engine, "outages",
                      f"compat {self.compat!r} replays a machine without outages; drop "
                      "--compat, or the site model's outages")

    @property
    def preset(self) -> CompatPreset:
        """The behaviours :attr:`compat` selects (:mod:`hpcpolicy.compat`)."""
        return compat_preset(self.compat)


@dataclass(frozen=True)
class RunningJobs:
    """Jobs already occupying the machine when the replay starts (a warm start).

    They hold their resources until ``end`` and are planned (reservations, backfilling) with
    ``req_end``; they are not part of the workload and have no outcome row.

    Example:
        >>> import numpy as np
        >>> r = RunningJobs(procs=np.array([4]), nodes=np.array([0]), gpus=np.array([0]),
        ...                 end=np.array([100]), req_end=np.array([3600]))
        >>> len(r)
        1
    """

    procs: I64
    """Processors (cores) each job occupies."""
    nodes: I64
    """Nodes requested (0 = any placement)."""
    gpus: I64
    """GPUs each job occupies."""
    end: I64
    """When each job really ends (s since the workload's origin)."""
    req_end: I64
    """When each job's requested walltime runs out (s since origin); what planning sees."""
    mem_mib: I64 | None = None
    """Memory of each job (MiB); None = 0 for all."""

    def __post_init__(self) -> None:
        n = len(self.procs)
        for name in ("nodes", "gpus", "end", "req_end"):
            if len(getattr(self, name)) != n:
                raise ConfigError(f"RunningJobs.{name} has {len(getattr(self, name))} entries, "
                                  f"procs has {n}")
        if self.mem_mib is not None and len(self.mem_mib) != n:
            raise ConfigError(f"RunningJobs.mem_mib has {len(self.mem_mib)} entries, procs has {n}")

    def __len__(self) -> int:
        return len(self.procs)

    @classmethod
    def empty(cls) -> RunningJobs:
        """No running jobs (a cold start)."""
        z = np.zeros(0, dtype=np.int64)
        return cls(procs=z, nodes=z, gpus=z, end=z, req_end=z)


def _empty_i64() -> I64:
    return np.zeros(0, dtype=np.int64)


def _empty_bool() -> npt.NDArray[np.bool_]:
    return np.zeros(0, dtype=bool)


@dataclass
class SimResult:
    """Per-job outcome of a run, aligned with the workload's job order."""

    start: npt.NDArray[np.int64]
    """Start time (s since the workload's origin); -1 for a job that never started."""
    end: npt.NDArray[np.int64]
    """End time (s); -1 for a job that never started."""
    never_fits: npt.NDArray[np.bool_]
    """True for jobs that request more than the cluster has (reported, not shrunk)."""
    killed: npt.NDArray[np.bool_]
    """True for jobs ended at their limit (``kill_at_limit``)."""
    stats: dict[str, Any] = field(default_factory=dict)
    """Engine counters: decisions, events, backfilled jobs, wall time of the run."""
    backfilled: npt.NDArray[np.bool_] = field(default_factory=_empty_bool)
    """True for jobs started ahead of a blocked higher-priority job (by backfilling)."""
    alloc_cores: npt.NDArray[np.int64] = field(default_factory=_empty_i64)
    """Cores a job held (whole nodes' cores under ``exclusive_nodes``); 0 if never started."""
    alloc_gpus: npt.NDArray[np.int64] = field(default_factory=_empty_i64)
    """GPUs a job held (whole nodes' GPUs under ``exclusive_nodes``); 0 if never started."""
    group: npt.NDArray[np.int64] = field(default_factory=_empty_i64)
    """Index of the node group (ClusterSpec.groups) a job ran in; -1 if never started."""
    placement: dict[str, npt.NDArray[Any]] = field(default_factory=dict)
    """Per-job facts of a node-level GPU placement (:mod:`hpcpolicy.sim.gpu_engine`): nodes and
    racks used, GPU distance, run-time factors; empty for the pooled ``first-fit`` allocator."""
