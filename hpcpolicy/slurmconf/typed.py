"""The typed view of settings: priority, scheduler and partition parameters read from text.

The same functions read a file's settings and a changed copy of them, so a change is held to
the checks a file is. Ranges are Slurm's (read_config.c, backfill.c, job_scheduler.c at
SchedMD/slurm 284c3b95): Slurm stops on a bad PriorityWeight*, PriorityMaxAge or
PriorityDecayHalfLife, and logs "Invalid SchedulerParameters" and falls back to the default
for a bf_* value out of range; both are refused here, since the site would not get the value
it wrote.
"""

from __future__ import annotations

from collections.abc import Mapping

from hpcpolicy.errors import ConfigError
from hpcpolicy.hostlist import expand_hostlist
from hpcpolicy.slurmconf.model import (
    NodeIndex,
    Partition,
    PriorityParameters,
    SchedulerParameters,
    Setting,
    Source,
)
from hpcpolicy.slurmconf.values import (
    param_list,
    slurm_bool,
    slurm_minutes,
    slurm_uint,
)

__all__ = [
    "BF_RANGES",
    "PRIORITY_FACTORS",
    "partition_of",
    "priority_of",
    "scheduler_of",
    "tres_weights",
]

PRIORITY_FACTORS = ("Age", "Assoc", "Fairshare", "JobSize", "Partition", "QOS")
"""The PriorityWeight<factor> keys with one number each (PriorityWeightTRES is a list)."""
BF_RANGES: Mapping[str, tuple[int, int]] = {
    "bf_interval": (-1, 10800), "bf_window": (1, 43200), "bf_resolution": (1, 3600),
    "bf_max_job_test": (1, 1_000_000), "bf_max_job_user": (0, 1_000_000),
    "default_queue_depth": (0, 2**31 - 1)}
"""SchedulerParameters with a number Slurm checks, and the range it accepts."""
_STATES = ("UP", "DOWN", "DRAIN", "INACTIVE")
_UINT16 = 65535


def _minutes_s(setting: Setting) -> int | None:
    minutes = slurm_minutes(setting.value, setting.where())
    return None if minutes is None else minutes * 60


def tres_weights(setting: Setting) -> dict[str, float]:
    """``CPU=1000,Mem=2000,GRES/gpu=3000`` as a mapping; refuses a pair without a number."""
    out: dict[str, float] = {}
    for name, weight in param_list(setting.value, lower=False).items():
        try:
            out[name] = float(weight or "")
        except ValueError:
            raise ConfigError(f"{setting.where()}: {name}={weight} has no number; write "
                              "TRES=weight pairs, e.g. CPU=1000,Mem=2000,GRES/gpu=3000") from None
    return out


def priority_of(settings: Mapping[str, Setting]) -> PriorityParameters:
    """The priority parameters of the whole-file settings (absent keys: Slurm's defaults)."""
    defaults = PriorityParameters()
    weights = {f: slurm_uint(s.value, s.where(), unlimited=False) or 0
               for f in PRIORITY_FACTORS if (s := settings.get(f"PriorityWeight{f}"))}
    kind = settings.get("PriorityType")
    if kind is not None and not kind.value.lower().startswith("priority/"):
        raise ConfigError(f"{kind.where()}: {kind.value!r} is not a priority plugin; write "
                          "priority/multifactor or priority/basic")
    half, age = settings.get("PriorityDecayHalfLife"), settings.get("PriorityMaxAge")
    small, flags = settings.get("PriorityFavorSmall"), settings.get("PriorityFlags")
    tres = settings.get("PriorityWeightTRES")
    return PriorityParameters(
        type=kind.value.lower() if kind else defaults.type, weights=weights,
        tres_weights=tres_weights(tres) if tres else {},
        decay_half_life_s=_minutes_s(half) if half else defaults.decay_half_life_s,
        max_age_s=_minutes_s(age) if age else defaults.max_age_s,
        favor_small=slurm_bool(small.value, small.where()) if small else False,
        flags=tuple(f.upper() for f in param_list(flags.value)) if flags else ())


def _bf_number(params: Mapping[str, str | None], key: str, default: int, where: str) -> int:
    if key not in params:
        return default
    low, high = BF_RANGES[key]
    text = params[key] or ""
    try:
        value = int(text)
    except ValueError:
        value = low - 1
    if not low <= value <= high:
        raise ConfigError(f"{where}: {key}={text} is not a whole number in {low}..{high}; "
                          f"Slurm logs 'Invalid SchedulerParameters' and uses {default}")
    return value


def scheduler_of(settings: Mapping[str, Setting]) -> SchedulerParameters:
    """The scheduler type and SchedulerParameters of the whole-file settings."""
    d = SchedulerParameters()
    kind, written = settings.get("SchedulerType"), settings.get("SchedulerParameters")
    params = param_list(written.value) if written else {}
    where = written.where() if written else "SchedulerParameters"
    numbers = {k: _bf_number(params, k, getattr(d, k + suffix), where)
               for k, suffix in (("bf_interval", "_s"), ("bf_window", "_min"),
                                 ("bf_resolution", "_s"), ("bf_max_job_test", ""),
                                 ("bf_max_job_user", ""), ("default_queue_depth", ""))}
    return SchedulerParameters(
        type=kind.value.lower() if kind else d.type, bf_interval_s=numbers["bf_interval"],
        bf_window_min=numbers["bf_window"], bf_resolution_s=numbers["bf_resolution"],
        bf_max_job_test=numbers["bf_max_job_test"],
        bf_max_job_user=numbers["bf_max_job_user"], bf_continue="bf_continue" in params,
        default_queue_depth=numbers["default_queue_depth"],
        others={k: v for k, v in params.items() if k not in BF_RANGES and k != "bf_continue"})


def hostnames(setting: Setting) -> tuple[str, ...]:
    """The node names of a host list value (``n[01-16,20]``), refused in one line naming
    ``file:line:key`` when malformed or longer than
    :data:`~hpcpolicy.hostlist.MAX_HOSTLIST`."""
    try:
        return tuple(expand_hostlist(setting.value))
    except ConfigError as exc:
        raise ConfigError(f"{setting.where()}: {exc}") from None


def _partition_nodes(setting: Setting | None, index: NodeIndex) -> tuple[str, ...]:
    """A partition's Nodes=: ``ALL``, host lists and NodeSet names."""
    if setting is None:
        return ()
    if setting.value.upper() == "ALL":
        return index.every
    names: list[str] = []
    for item in hostnames(setting):
        names.extend(index.sets.get(item, (item,)))
    missing = sorted({n for n in names if n not in index.known})
    if missing:
        raise ConfigError(f"{setting.where()}: node(s) {', '.join(missing[:5])} are not "
                          "defined by any NodeName line; define them or drop them here")
    return tuple(dict.fromkeys(names))


def _tier(settings: Mapping[str, Setting], key: str) -> int:
    setting = settings.get(key) or settings.get("Priority")
    if setting is None:
        return 1
    value = slurm_uint(setting.value, setting.where(), unlimited=False) or 0
    if value > _UINT16:
        raise ConfigError(f"{setting.where()}: {value} is above {_UINT16}, the largest "
                          f"{key} Slurm stores")
    return value


def partition_of(name: str, settings: Mapping[str, Setting], own: frozenset[str],
                 source: Source, nodes: NodeIndex) -> Partition:
    """The typed partition of a PartitionName line's settings (DEFAULT values merged in)."""
    state = settings.get("State")
    if state is not None and state.value.upper() not in _STATES:
        raise ConfigError(f"{state.where()}: {state.value!r} is not a partition state; write "
                          f"one of {', '.join(_STATES)}")
    limit = {k: settings.get(k) for k in ("MaxTime", "DefaultTime", "MaxNodes", "Default")}
    max_nodes = limit["MaxNodes"]
    return Partition(
        name=name, nodes=_partition_nodes(settings.get("Nodes"), nodes),
        default=slurm_bool(limit["Default"].value, limit["Default"].where())
        if limit["Default"] else False,
        state=state.value.upper() if state else "UP",
        max_time_s=_minutes_s(limit["MaxTime"]) if limit["MaxTime"] else None,
        default_time_s=_minutes_s(limit["DefaultTime"]) if limit["DefaultTime"] else None,
        max_nodes=slurm_uint(max_nodes.value, max_nodes.where()) if max_nodes else None,
        priority_tier=_tier(settings, "PriorityTier"),
        priority_job_factor=_tier(settings, "PriorityJobFactor"),
        qos=settings["QOS"].value if "QOS" in settings else None,
        settings=dict(settings), own=own, source=source)
