"""Applying a candidate's changes to a configuration: a new configuration, typed and checked again.

slurm.conf changes go through :func:`~hpcpolicy.slurmconf.build.with_settings`, so a changed
value meets the checks a written one does; QOS and association changes edit the sacctmgr part
of the model (without dumps there is nothing to check a name against, so the QOS or
association is taken as named).

Example:
    >>> import pathlib, tempfile
    >>> conf = pathlib.Path(tempfile.mkdtemp()) / "slurm.conf"
    >>> _ = conf.write_text("NodeName=n1\\nPartitionName=batch Nodes=n1 MaxTime=1-0\\n")
    >>> new = apply_candidate(read_slurm_conf(conf), "partition batch MaxTime=2-0")
    >>> new.partitions["batch"].max_time_s
    172800
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from hpcpolicy.errors import ConfigError
from hpcpolicy.slurmconf.build import read_slurm_conf, with_settings
from hpcpolicy.slurmconf.changes import (
    AssocChange,
    Change,
    ConfFile,
    GlobalChange,
    PartitionChange,
    QosChange,
    SchedulerChange,
    parse_candidate,
)
from hpcpolicy.slurmconf.model import Association, Qos, Setting, SlurmConfig, Source
from hpcpolicy.slurmconf.values import slurm_uint

__all__ = ["apply_candidate", "apply_changes"]


def _scheduler_value(old: str, key: str, value: str | None) -> str:
    """SchedulerParameters ``old`` with option ``key`` set (its place kept, else appended)."""
    item = key if value is None else f"{key}={value}"
    items = [i for i in old.split(",") if i.strip()]
    for n, written in enumerate(items):
        if written.strip().partition("=")[0].lower() == key:
            items[n] = item
            return ",".join(items)
    return ",".join([*items, item])


def _qos(config: SlurmConfig, change: QosChange, source: Source) -> dict[str, Qos]:
    qos = dict(config.qos)
    old = qos.get(change.qos)
    if old is None and config.qos:
        raise ConfigError(f"{source}: no QOS {change.qos} in the sacctmgr dump; one of "
                          f"{', '.join(sorted(config.qos))}")
    old = old or Qos(change.qos, 0, {}, source)
    if change.key == "Priority":
        priority = slurm_uint(change.value, f"{source}:Priority", unlimited=False) or 0
        qos[change.qos] = replace(old, priority=priority)
    else:
        qos[change.qos] = replace(old, limits={**old.limits, change.key: change.value})
    return qos


def _matches(assoc: Association, where: Mapping[str, str]) -> bool:
    fields = {"cluster": assoc.cluster, "account": assoc.account, "user": assoc.user or "",
              "partition": assoc.partition or ""}
    return all(fields[k] == where.get(k, fields[k] if k == "cluster" else "")
               for k in fields)


def _assoc(config: SlurmConfig, change: AssocChange,
           source: Source) -> tuple[Association, ...]:
    where = dict(change.where)
    rows = [a for a in config.associations if _matches(a, where)]
    if not rows and config.associations:
        named = " ".join(f"{k}={v}" for k, v in change.where)
        raise ConfigError(f"{source}: no association {named} in the sacctmgr dump; name one "
                          "it lists")
    if not rows:
        user = where.get("user")
        rows = [Association(where.get("cluster", ""), where["account"], user,
                            where.get("partition"), where["account"] if user else None, "1",
                            {}, source)]
    new = [replace(a, shares=change.value) if change.key == "Share"
           else replace(a, limits={**a.limits, change.key: change.value}) for a in rows]
    kept = tuple(a for a in config.associations if a not in rows)
    return kept + tuple(new)


def apply_changes(config: SlurmConfig, changes: tuple[Change, ...],
                  label: str) -> SlurmConfig:
    """``config`` with ``changes`` applied in order (``label`` names them in messages).

    Raises:
        ConfigError: a value Slurm would refuse, or a partition, QOS or association the
            configuration does not have.
    """
    source = Source(f"candidate {label!r}", 0)
    settings = dict(config.settings)
    partitions: dict[str, dict[str, Setting]] = {}
    for change in changes:
        if isinstance(change, ConfFile):
            config = replace(read_slurm_conf(change.path), qos=config.qos,
                             associations=config.associations)
            settings = dict(config.settings)
        elif isinstance(change, GlobalChange):
            settings[change.key] = Setting(change.key, change.value, source)
        elif isinstance(change, SchedulerChange):
            old = settings.get("SchedulerParameters")
            value = _scheduler_value(old.value if old else "", change.key, change.value)
            settings["SchedulerParameters"] = Setting("SchedulerParameters", value, source)
        elif isinstance(change, PartitionChange):
            if change.partition not in config.partitions:
                raise ConfigError(f"{source}: no partition {change.partition} in slurm.conf; "
                                  f"one of {', '.join(config.partitions) or '(none defined)'}")
            part = partitions.setdefault(change.partition,
                                         dict(config.partitions[change.partition].settings))
            part[change.key] = Setting(change.key, change.value, source)
        elif isinstance(change, QosChange):
            config = replace(config, qos=_qos(config, change, source))
        else:
            config = replace(config, associations=_assoc(config, change, source))
    return with_settings(config, settings, partitions)


def apply_candidate(config: SlurmConfig, candidate: str) -> SlurmConfig:
    """``config`` with the candidate's changes applied (see :mod:`.changes` for the forms)."""
    return apply_changes(config, parse_candidate(candidate), candidate)
