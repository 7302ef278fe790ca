"""The answer as a change to apply: the slurm.conf diff, the sacctmgr commands, how to make
Slurm take the change, and what to watch afterwards.

When a restart is needed comes from slurm.conf(5). Up to Slurm 23.02 the page says, key by
key, "A restart of slurmctld is required for changes to this parameter to take effect" (or
of slurmctld and slurmd, or of all daemons): those keys are :data:`RESTART_KEYS`, and a
change of node definitions too ("Changes in node configuration (e.g. adding nodes, changing
their processor count, etc.) require restarting both the slurmctld daemon and the slurmd
daemons"). Since 23.11, scontrol(1) says ``scontrol reconfigure`` starts new daemons itself,
"This will not be able to change the daemons' listening TCP port settings or authentication
mechanism": those keys (:data:`STOP_START_KEYS`) need every daemon stopped and started
whatever the release. QOS and association changes made with ``sacctmgr`` take effect at once.

Example:
    >>> import pathlib, tempfile
    >>> from hpcpolicy.slurmconf.apply import apply_candidate
    >>> from hpcpolicy.slurmconf.build import read_slurm_conf
    >>> conf = pathlib.Path(tempfile.mkdtemp()) / "slurm.conf"
    >>> _ = conf.write_text("ClusterName=c\\n")
    >>> old = read_slurm_conf(conf)
    >>> advice = change_advice(old, apply_candidate(old, "qos normal MaxJobsPerUser=50"))
    >>> advice.sacctmgr
    ('sacctmgr -i modify qos where name=normal set MaxJobsPerUser=50',)
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from hpcpolicy.slurmconf.diff import conf_diff, written
from hpcpolicy.slurmconf.model import Association, Qos, SlurmConfig

__all__ = ["RESTART_KEYS", "STOP_START_KEYS", "ChangeAdvice", "change_advice", "changed_keys"]

RESTART_KEYS = frozenset({
    "AccountingStorageEnforce", "AuthType", "CoreSpecPlugin", "CredType", "GresTypes",
    "JobCompLoc", "JobContainerType", "MaxJobCount", "MaxNodeCount", "NodeName",
    "PluginDir", "PowerPlugin", "ProctrackType", "SchedulerType", "SelectType",
    "SelectTypeParameters", "SlurmctldHost", "SlurmctldParameters", "SlurmctldPort",
    "SlurmdPort", "StateSaveLocation", "SwitchType"})
"""Keys whose change slurm.conf(5) of Slurm 23.02 says needs a daemon restart
(SlurmctldParameters for its enable_configless and no_backup_scheduling options)."""
STOP_START_KEYS = frozenset({"AuthType", "SlurmctldPort", "SlurmdPort"})
"""Keys no reconfigure can change, in any release (listening ports, authentication)."""
_PRIORITY = ("PriorityType", "PriorityWeight", "PriorityMaxAge", "PriorityFavorSmall",
             "PriorityFlags", "PriorityTier", "PriorityJobFactor", "Priority")
_FAIRSHARE = ("PriorityWeightFairshare", "PriorityDecayHalfLife", "PriorityUsageResetPeriod",
              "PriorityFlags", "Fairshare")


@dataclass(frozen=True)
class ChangeAdvice:
    """How to make a candidate configuration the site's."""

    diff: str
    """Unified diff against the slurm.conf read (and its includes); empty if none."""
    sacctmgr: tuple[str, ...]
    """``sacctmgr -i modify ...`` commands for QOS and association changes."""
    steps: tuple[str, ...]
    """What to run, in order, for the slurm.conf part to take effect."""
    watch: tuple[str, ...]
    """Commands to watch afterwards, each with what it shows for this change."""


def changed_keys(old: SlurmConfig, new: SlurmConfig) -> list[str]:
    """slurm.conf keys whose value differs (``PartitionName.<Key>`` for a partition key,
    ``NodeName`` when node definitions differ), then ``qos.<Key>`` and ``assoc.<Key>``."""
    keys = sorted(k for k in old.settings.keys() | new.settings.keys()
                  if getattr(old.settings.get(k), "value", None)
                  != getattr(new.settings.get(k), "value", None))
    for name in old.partitions.keys() | new.partitions.keys():
        a, b = old.partitions.get(name), new.partitions.get(name)
        a_set = {k: s.value for k, s in a.settings.items()} if a else {}
        b_set = {k: s.value for k, s in b.settings.items()} if b else {}
        keys += sorted(f"PartitionName.{k}" for k in a_set.keys() | b_set.keys()
                       if a_set.get(k) != b_set.get(k))
    if [g.names for g in old.nodes] != [g.names for g in new.nodes] or [
            g.cpus for g in old.nodes] != [g.cpus for g in new.nodes]:
        keys.append("NodeName")
    keys += [f"qos.{k}" for _, k, _ in _qos_sets(old, new)]
    keys += [f"assoc.{k}" for _, sets in _assoc_sets(old, new) for k, _ in sets]
    return list(dict.fromkeys(keys))


def _qos_sets(old: SlurmConfig, new: SlurmConfig) -> Iterator[tuple[str, str, str]]:
    """(QOS, key, new value) of every QOS value that differs."""
    for name, qos in new.qos.items():
        before = old.qos.get(name) or Qos(name, 0, {}, qos.source)  # without a dump: blank
        if before.priority != qos.priority:
            yield name, "Priority", str(qos.priority)
        for key, value in qos.limits.items():
            if before.limits.get(key) != value:
                yield name, key, value


def _key(a: Association) -> tuple[str, str, str | None, str | None]:
    return a.cluster, a.account, a.user, a.partition


def _assoc_sets(old: SlurmConfig,
                new: SlurmConfig) -> Iterator[tuple[Association, list[tuple[str, str]]]]:
    before = {_key(a): a for a in old.associations}
    for assoc in new.associations:
        was = before.get(_key(assoc))
        sets = [] if was is not None and was.shares == assoc.shares else [
            ("Fairshare", assoc.shares)]
        sets += [(k, v) for k, v in assoc.limits.items()
                 if was is None or was.limits.get(k) != v]
        if sets:
            yield assoc, sets


def _sacctmgr(old: SlurmConfig, new: SlurmConfig) -> tuple[str, ...]:
    commands = []
    by_qos: dict[str, list[str]] = {}
    for name, key, value in _qos_sets(old, new):
        by_qos.setdefault(name, []).append(f"{key}={written(value)}")
    for name, sets in by_qos.items():
        commands.append(f"sacctmgr -i modify qos where name={name} set {' '.join(sets)}")
    for assoc, pairs in _assoc_sets(old, new):
        where = ([f"name={assoc.user}", f"account={assoc.account}"] if assoc.user
                 else [f"name={assoc.account}"])
        where += [f"partition={assoc.partition}"] if assoc.partition else []
        where += [f"cluster={assoc.cluster}"] if assoc.cluster else []
        values = " ".join(f"{k}={written(v)}" for k, v in pairs)
        commands.append(f"sacctmgr -i modify {'user' if assoc.user else 'account'} where "
                        f"{' '.join(where)} set {values}")
    return tuple(commands)


def _steps(conf_keys: list[str]) -> tuple[str, ...]:
    if not conf_keys:
        return ()
    steps = ["copy the changed slurm.conf to every node (or only to the slurmctld host when "
             "it serves the configuration: SlurmctldParameters=enable_configless)"]
    bare = {k.split(".")[0] for k in conf_keys}
    stop = sorted(bare & STOP_START_KEYS)
    restart = sorted(bare & RESTART_KEYS)
    if stop:
        steps.append(f"stop every Slurm daemon and start them again: {', '.join(stop)} "
                     "cannot change on a reconfigure")
    elif restart:
        steps.append(f"restart slurmctld (and the slurmd daemons) for {', '.join(restart)} on "
                     "Slurm before 23.11; from 23.11 `scontrol reconfigure` restarts them")
    steps.append("scontrol reconfigure")
    return tuple(steps)


def _watch(keys: list[str]) -> tuple[str, ...]:
    bare = [k.split(".")[-1] for k in keys]
    out = []
    if any(k.startswith(_PRIORITY) for k in bare):
        out.append("sprio -w (the weights in force) and sprio -l (each pending job's "
                   "priority factors): the new order of the queue")
    if any(k.startswith(_FAIRSHARE) for k in bare):
        out.append("sshare -l: shares, usage and fair-share factors of accounts and users")
    if any(k.startswith(("SchedulerParameters", "SchedulerType")) for k in keys):
        out.append("sdiag: backfill cycle length, jobs tested and started by backfill, "
                   "main-scheduler depth")
    if any(k.startswith(("qos.", "assoc.", "PartitionName.Max")) for k in keys):
        out.append('squeue -t PENDING -o "%.10i %.9P %.8u %r": pending reasons such as '
                   "QOSMaxJobsPerUserLimit or AssocGrpCpuLimit")
    return tuple(out)


def change_advice(old: SlurmConfig, new: SlurmConfig) -> ChangeAdvice:
    """The diff, sacctmgr commands, steps and commands to watch that turn ``old`` into
    ``new`` (a candidate applied to it)."""
    keys = changed_keys(old, new)
    conf_keys = [k for k in keys if not k.startswith(("qos.", "assoc."))]
    return ChangeAdvice(diff=conf_diff(old, new), sacctmgr=_sacctmgr(old, new),
                        steps=_steps(conf_keys), watch=_watch(keys))
