"""The site model: what the log does not state about the machine and its rules.

A :class:`SiteModel` holds the elements ``hpcpolicy calibrate`` fits to a log (node size,
partitions with their own nodes, running limits, capacity that was missing, holds, the
priority order and the scheduler's cadence). Each element is optional: ``None`` (or its
"off" value) leaves the replay as it was. Every element carries the evidence that supports
it, in words, which :mod:`hpcpolicy.world.site_toml` writes as comments beside it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from hpcpolicy.cluster import ClusterSpec
from hpcpolicy.errors import ConfigError
from hpcpolicy.sim import capacity
from hpcpolicy.sim.types import BACKFILL_MODES

__all__ = ["PRIORITIES", "Outage", "Pool", "SiteModel", "engine_outages", "merge_outages"]

PRIORITIES = ("fcfs", "fairshare")
"""Priority orders a site model can name: first come first served, or Slurm-style
multifactor (age, size, fair share with a half-life)."""


@dataclass(frozen=True)
class Outage:
    """Cores that were missing over an interval (an outage, a drain, a reservation),
    replayed as an unplanned outage (:mod:`hpcpolicy.sim.capacity`, :func:`engine_outages`).

    Times are absolute (Unix seconds, UTC; site.toml writes them as dates), so that a model
    fitted on one job table applies to another table of the same machine, whatever its first
    submit.
    """

    start_s: int
    """Start, Unix seconds (UTC)."""
    end_s: int
    """End, Unix seconds (UTC)."""
    cores: int
    """Cores missing meanwhile."""

    def __post_init__(self) -> None:
        if self.end_s <= self.start_s:
            raise ConfigError(f"capacity.outages: end_s {self.end_s} must be after start_s "
                              f"{self.start_s}")
        if self.cores < 1:
            raise ConfigError(f"capacity.outages: cores must be >= 1, not {self.cores}")


@dataclass(frozen=True)
class Pool:
    """A partition that runs on nodes of its own."""

    partition: str
    """Partition (queue) name as the job table spells it."""
    cores: int
    """Cores of its nodes."""

    def __post_init__(self) -> None:
        if self.cores < 1:
            raise ConfigError(f"pools.{self.partition}: cores must be >= 1, not {self.cores}")


@dataclass(frozen=True)
class SiteModel:
    """The world a log was scheduled in, as far as the log shows it.

    Example:
        >>> SiteModel(user_jobs=8).elements()
        ['limits']
    """

    cores_per_node: int = 0
    """Cores per node; 0 = nodes are not modelled (cores are pooled)."""
    whole_node: bool = False
    """Jobs get whole nodes (needs ``cores_per_node``)."""
    machine_cores: int = 0
    """Cores of the whole machine; 0 = as the log header (or ``--procs``/``--cluster``) gives
    it. Set where the log ran more cores at once than the header's machine has."""
    pools: tuple[Pool, ...] = ()
    """Partitions with nodes of their own; the other partitions share the rest."""
    user_jobs: int = 0
    """Most running jobs per user; 0 = no limit."""
    user_cores: int = 0
    """Most running cores per user; 0 = no limit."""
    availability: float = 1.0
    """Share of the machine's cores that was there on average (1 = all); the replay runs
    jobs 1/availability times longer (:mod:`hpcpolicy.world.apply`)."""
    outages: tuple[Outage, ...] = ()
    """Intervals with cores missing, found in the fitted part of the log and replayed as
    unplanned outages; :attr:`availability` stands for what they do not explain."""
    use_eligible: bool = False
    """Schedule a job from its eligible time (holds, dependencies), not its submit."""
    priority: str = "fcfs"
    """One of :data:`PRIORITIES`."""
    weight_age: float = 1000.0
    """Multifactor weight of the age factor (``priority = "fairshare"``)."""
    weight_size: float = 1000.0
    """Multifactor weight of the job-size factor."""
    weight_fairshare: float = 10000.0
    """Multifactor weight of the fair-share factor."""
    half_life_s: int = 7 * 86400
    """Half-life of past usage in the fair-share factor."""
    interval_s: int = 0
    """Scheduler cadence: jobs are seen at the next multiple of this many seconds; 0 = at once."""
    backfill: str = "easy"
    """Backfilling the site ran: none, easy or conservative."""
    evidence: dict[str, str] = field(default_factory=dict)
    """Per element (nodes, pools, limits, capacity, holds, priority, cadence): why it is there
    (or why not), in words."""
    provenance: dict[str, Any] = field(default_factory=dict)
    """Where the model came from: source log, fit fraction, out-of-sample fidelity."""

    def __post_init__(self) -> None:
        if not 0.05 <= self.availability <= 1.0:
            raise ConfigError(f"capacity.availability must be in [0.05, 1], not "
                              f"{self.availability}")
        if self.priority not in PRIORITIES:
            raise ConfigError(f"priority.policy {self.priority!r} is not one of "
                              f"{', '.join(PRIORITIES)}")
        if self.backfill not in BACKFILL_MODES:
            raise ConfigError(f"cadence.backfill {self.backfill!r} is not one of "
                              f"{', '.join(BACKFILL_MODES)}")
        if self.whole_node and self.cores_per_node < 1:
            raise ConfigError("nodes.whole_node needs nodes.cores_per_node >= 1")
        for name in ("cores_per_node", "machine_cores", "user_jobs", "user_cores", "interval_s"):
            if getattr(self, name) < 0:
                raise ConfigError(f"{_KEYS[name]} must be >= 0, not {getattr(self, name)}")
        if self.half_life_s < 1:
            raise ConfigError("priority.half_life_s must be >= 1")
        names = [p.partition for p in self.pools]
        if len(set(names)) != len(names):
            raise ConfigError("pools: a partition is listed twice")

    def elements(self) -> list[str]:
        """Names of the elements that change the replay."""
        on = {
            "nodes": self.cores_per_node > 0 or self.machine_cores > 0,
            "pools": bool(self.pools),
            "limits": self.user_jobs > 0 or self.user_cores > 0,
            "outages": bool(self.outages),
            "capacity": self.availability < 1.0,
            "holds": self.use_eligible,
            "priority": self.priority != "fcfs",
            "cadence": self.interval_s > 0 or self.backfill != "easy",
        }
        return [name for name, used in on.items() if used]

    def without(self, element: str) -> SiteModel:
        """The model with ``element`` (a name :meth:`elements` gives) at its off value.

        Example:
            >>> SiteModel(user_jobs=8, availability=0.9).without("limits").elements()
            ['capacity']
        """
        if element not in _OFF:
            raise ConfigError(f"site model element {element!r} is not one of {', '.join(_OFF)}")
        return replace(self, **_OFF[element])

    def check_machine(self, total_cores: int) -> None:
        """Refuse pools larger than the machine.

        Raises:
            ConfigError: naming the key.
        """
        pooled = sum(p.cores for p in self.pools)
        if pooled > total_cores:
            raise ConfigError(f"pools: {pooled:,} cores in pools, more than the machine's "
                              f"{total_cores:,}; shrink pools.<partition> or replay on a larger "
                              "machine (--cluster/--procs)")


_OFF: dict[str, dict[str, Any]] = {
    "nodes": {"cores_per_node": 0, "whole_node": False, "machine_cores": 0},
    "pools": {"pools": ()}, "limits": {"user_jobs": 0, "user_cores": 0},
    "outages": {"outages": ()}, "capacity": {"availability": 1.0},
    "holds": {"use_eligible": False}, "priority": {"priority": "fcfs"},
    "cadence": {"interval_s": 0, "backfill": "easy"},
}
"""Each element's fields at their off values."""

_KEYS = {"cores_per_node": "nodes.cores_per_node", "machine_cores": "nodes.machine_cores",
         "user_jobs": "limits.user_jobs",
         "user_cores": "limits.user_cores", "interval_s": "cadence.interval_s"}


def merge_outages(found: list[tuple[int, int, int]], *, min_cores: int, gap_s: int,
                  most: int) -> tuple[Outage, ...]:
    """Intervals (start, end, cores; Unix seconds) as a short list an admin can read: those
    less than ``gap_s`` apart merged (the fewer cores of the two kept: what was surely missing
    throughout), those under ``min_cores`` dropped, then the ``most`` largest (cores x
    length), in time order.

    Example:
        >>> merge_outages([(0, 3600, 40), (4000, 9000, 30), (20000, 30000, 2)],
        ...               min_cores=8, gap_s=3600, most=10)
        (Outage(start_s=0, end_s=9000, cores=30),)
    """
    merged: list[list[int]] = []
    for a, b, c in sorted(found):
        if merged and a - merged[-1][1] < gap_s:
            last = merged[-1]
            last[1], last[2] = max(last[1], b), min(last[2], c)
        else:
            merged.append([a, b, c])
    kept = sorted((m for m in merged if m[2] >= min_cores),
                  key=lambda m: -(m[1] - m[0]) * m[2])[:most]
    return tuple(Outage(a, b, c) for a, b, c in sorted(kept))


def engine_outages(outages: tuple[Outage, ...], origin: int, machine: ClusterSpec,
                   group: str = "") -> tuple[capacity.Outage, ...]:
    """Dated outages as the engines replay them: seconds since ``origin`` (the workload's
    t = 0), in node group ``group`` of ``machine`` (empty: its first), at most that group's
    cores; those over before ``origin`` are left out.

    Example:
        >>> engine_outages((Outage(start_s=1500, end_s=4000, cores=9),), 1000,
        ...                ClusterSpec.homogeneous(4))
        (Outage(start=500, end=3000, cores=4, nodes=0, group=''),)
    """
    size = next((g.count * g.cores for g in machine.groups if g.name == group),
                machine.groups[0].count * machine.groups[0].cores)
    return tuple(capacity.Outage(start=max(o.start_s - origin, 0), end=o.end_s - origin,
                                 cores=min(o.cores, size), group=group)
                 for o in outages if o.end_s > origin)
