"""Configuration changes as candidates: a small language and the typed changes it reads
(:mod:`.apply` applies them to a configuration).

One candidate is one text; it may hold several changes of one kind:

* ``PriorityWeightAge=5000,PriorityMaxAge=14-0`` whole-file keys (commas or blanks between
  pairs; ``PriorityWeightTRES=CPU=1000,Mem=2000`` keeps its own commas);
* ``bf_window=2880`` or ``SchedulerParameters: bf_window=2880,bf_continue`` one
  SchedulerParameters option each (a bare name is a flag);
* ``partition batch MaxTime=2-0`` or ``PartitionName=batch PriorityTier=2``;
* ``qos normal MaxJobsPerUser=50``;
* ``assoc account=physics Fairshare=200`` (``user=``, ``partition=``, ``cluster=`` narrow it);
* ``conf:new-slurm.conf`` a whole new slurm.conf.

Example:
    >>> [c.value for c in parse_candidate("PriorityWeightAge=5000,PriorityMaxAge=14-0")]
    ['5000', '14-0']
    >>> parse_candidate("PriorityWeightTRES=CPU=1000,Mem=2000 bf_window=2880")
    ... # doctest: +NORMALIZE_WHITESPACE
    (GlobalChange(key='PriorityWeightTRES', value='CPU=1000,Mem=2000'),
     SchedulerChange(key='bf_window', value='2880'))
    >>> parse_candidate("qos normal MaxJobsPU=50")
    (QosChange(qos='normal', key='MaxJobsPerUser', value='50'),)
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from hpcpolicy.errors import ConfigError
from hpcpolicy.slurmconf.names import GLOBAL, PARTITION, SCHEDULER_PARAMETERS, canonical
from hpcpolicy.slurmconf.reader import LINE_KEYS
from hpcpolicy.slurmconf.sacctmgr import ALIASES, check_limit

__all__ = ["ASSOC_KEYS", "QOS_KEYS", "AssocChange", "Change", "ConfFile", "GlobalChange",
           "PartitionChange", "QosChange", "SchedulerChange", "parse_candidate"]

QOS_KEYS = ("Priority", "MaxJobsPerUser", "MaxSubmitJobsPerUser", "MaxTRESPerUser",
            "MaxJobsPerAccount", "MaxSubmitJobsPerAccount", "MaxTRESPerAccount", "MaxWall",
            "MaxTRES", "MaxTRESPerNode", "MaxTRESMins", "GrpTRES", "GrpTRESMins",
            "GrpTRESRunMins", "GrpJobs", "GrpSubmit", "GrpWall", "MinTRES", "UsageFactor",
            "UsageThres", "GraceTime", "Flags", "Preempt", "PreemptMode")
"""The QOS options ``sacctmgr modify qos ... set`` takes that a change may set (sacctmgr(1))."""
ASSOC_KEYS = ("Share", "Priority", "GrpTRES", "GrpTRESMins", "GrpTRESRunMins", "GrpJobs",
              "GrpSubmit", "GrpWall", "MaxJobs", "MaxSubmit", "MaxWall", "MaxTRES",
              "MaxTRESPerNode", "MaxTRESMins", "QOS", "DefaultQOS")
"""The association options a change may set (``Fairshare`` is read as ``Share``)."""
_SELECTORS = ("cluster", "account", "user", "partition")
_LIST_KEYS = frozenset({"PriorityWeightTRES", "SchedulerParameters", "PriorityFlags",
                        "AccountingStorageEnforce", "SlurmctldParameters", "DebugFlags"})


@dataclass(frozen=True)
class GlobalChange:
    """Set a whole-file key (Slurm's spelling)."""

    key: str
    value: str


@dataclass(frozen=True)
class SchedulerChange:
    """Set one SchedulerParameters option (lower case); ``value`` None writes it as a flag."""

    key: str
    value: str | None


@dataclass(frozen=True)
class PartitionChange:
    """Set a key on one partition's line."""

    partition: str
    key: str
    value: str


@dataclass(frozen=True)
class QosChange:
    """Set a QOS limit or priority (applied with ``sacctmgr modify qos``)."""

    qos: str
    key: str
    value: str


@dataclass(frozen=True)
class AssocChange:
    """Set an association's shares or limit; ``where`` holds the selectors written."""

    where: tuple[tuple[str, str], ...]
    key: str
    value: str


@dataclass(frozen=True)
class ConfFile:
    """Replace slurm.conf by another file."""

    path: Path


Change = GlobalChange | SchedulerChange | PartitionChange | QosChange | AssocChange | ConfFile
"""One typed change."""


def _known(key: str) -> bool:
    """Whether ``key`` names something a candidate may set (so it starts a new pair)."""
    low = ALIASES.get(key.lower(), key).lower()
    return (canonical(key, GLOBAL) is not None or low in SCHEDULER_PARAMETERS
            or low in _SELECTORS or low in {k.lower() for k in (*QOS_KEYS, *ASSOC_KEYS)}
            or canonical(key, PARTITION) is not None)


def _listed(key: str) -> bool:
    """Whether ``key``'s value is a comma list (PriorityWeightTRES, GrpTRES, Flags ...)."""
    return (canonical(key, GLOBAL) in _LIST_KEYS or "tres" in key.lower()
            or key.lower() in ("flags", "preempt", "qos"))


def _pairs(text: str, candidate: str) -> list[tuple[str, str | None]]:
    """``a=1,b=2 c`` as pairs; a piece after a list-valued key that is not itself a known
    key belongs to that key's value (``PriorityWeightTRES=CPU=1,Mem=2``)."""
    out: list[tuple[str, str | None]] = []
    for piece in (p for p in re.split(r"[,\s]+", text.strip()) if p):
        key, eq, value = piece.partition("=")
        if out and _listed(out[-1][0]) and not _known(key):
            out[-1] = (out[-1][0], f"{out[-1][1]},{piece}")
        else:
            out.append((key, value if eq else None))
    if not out:
        raise ConfigError(f"candidate {candidate!r}: no Key=Value in it; write e.g. "
                          "PriorityWeightAge=5000")
    return out


def _named(pairs: list[tuple[str, str | None]], allowed: tuple[str, ...], what: str,
           candidate: str) -> list[tuple[str, str]]:
    table = {k.lower(): k for k in allowed}
    out = []
    for key, value in pairs:
        name = table.get(ALIASES.get(key.lower(), key).lower())
        if name is None or value is None:
            raise ConfigError(f"candidate {candidate!r}: {key} is not a {what} option "
                              f"written Key=Value; use one of {', '.join(allowed)}")
        check_limit(name, value, f"candidate {candidate!r}: {name}")
        out.append((name, value))
    return out


def _global(key: str, value: str | None, candidate: str) -> Change:
    if key.lower() in SCHEDULER_PARAMETERS:
        return SchedulerChange(key.lower(), value)
    name = canonical(key, GLOBAL)
    if name is None or value is None or name.lower() in LINE_KEYS:
        raise ConfigError(f"candidate {candidate!r}: {key} is not a slurm.conf key written "
                          "Key=Value (nor a SchedulerParameters option); check its spelling "
                          "in slurm.conf(5)")
    return GlobalChange(name, value)


def parse_candidate(text: str) -> tuple[Change, ...]:
    """The typed changes of one candidate (see the module docstring for the forms).

    Raises:
        ConfigError: a key Slurm or sacctmgr does not know there, or a badly formed change;
            one line naming the candidate.
    """
    stripped = text.strip()
    head, _, rest = stripped.partition(" ")
    if stripped.lower().startswith("conf:"):
        return (ConfFile(Path(stripped[5:].strip())),)
    if stripped.lower().startswith("schedulerparameters:"):
        return tuple(SchedulerChange(k.lower(), v) for k, v in _pairs(stripped[20:], text))
    if head.lower().startswith("partitionname="):
        head, rest = "partition", f"{head.partition('=')[2]} {rest}"
    if head.lower() in ("partition", "qos"):
        name, _, settings = rest.strip().partition(" ")
        if head.lower() == "qos":
            return tuple(QosChange(name, k, v)
                         for k, v in _named(_pairs(settings, text), QOS_KEYS, "QOS", text))
        return tuple(PartitionChange(name, _partition_key(k, v, text), v or "")
                     for k, v in _pairs(settings, text))
    if head.lower() == "assoc":
        pairs = _pairs(rest, text)
        where = tuple((k.lower(), v or "") for k, v in pairs if k.lower() in _SELECTORS)
        if not any(k == "account" for k, _ in where):
            raise ConfigError(f"candidate {text!r}: name the association with account=NAME "
                              "(and user=, partition=, cluster= to narrow it)")
        sets = [(k, v) for k, v in pairs if k.lower() not in _SELECTORS]
        return tuple(AssocChange(where, k, v)
                     for k, v in _named(sets, ASSOC_KEYS, "association", text))
    return tuple(_global(k, v, text) for k, v in _pairs(stripped, text))


def _partition_key(key: str, value: str | None, candidate: str) -> str:
    name = canonical(key, PARTITION)
    if name is None or value is None:
        raise ConfigError(f"candidate {candidate!r}: {key} is not a partition key written "
                          "Key=Value; see PARTITION CONFIGURATION in slurm.conf(5)")
    return name
