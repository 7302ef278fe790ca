"""Configuration changes as what-if candidates: the site's slurm.conf (and sacctmgr dumps) as
the baseline, each change applied to it as a candidate, all replayed in the Slurm world.

:func:`open_slurm_site` reads the configuration once and applies every change a what-if
compares (:func:`hpcpolicy.slurmconf.apply_candidate`), so a change Slurm would refuse stops
the run before any replay. :func:`slurm_simulator` gives the runner the engine of one run:
the Slurm world (:mod:`hpcpolicy.world.slurm`) for the baseline and the changes, the pooled
engine for a policy candidate (``sjf+easy``), which then runs on slurm.conf's nodes and is
compared with the site's configuration replayed in the Slurm world.

Example:
    >>> import pathlib, tempfile
    >>> conf = pathlib.Path(tempfile.mkdtemp()) / "slurm.conf"
    >>> _ = conf.write_text("NodeName=n[1-4] CPUs=8\\nPartitionName=batch Nodes=ALL\\n")
    >>> site = open_slurm_site(str(conf), None, ["PriorityWeightAge=5000"])
    >>> site.machine.total_cores, site.changed["PriorityWeightAge=5000"].priority.weights
    (32, {'Age': 5000})
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from hpcpolicy.cluster import ClusterSpec, NodeGroup
from hpcpolicy.errors import ConfigError
from hpcpolicy.slurmconf import SlurmConfig, apply_candidate, read_slurm_conf, with_accounting

if TYPE_CHECKING:
    from hpcpolicy.sim.types import RunningJobs, SimConfig, SimResult
    from hpcpolicy.sim.windows import Simulate
    from hpcpolicy.whatif.scenarios import Scenario
    from hpcpolicy.whatif.spec import RunSpec
    from hpcpolicy.workload import Workload

__all__ = ["MACHINE_SCENARIO_KEYS", "SlurmFields", "SlurmSite", "check_slurm_scenarios",
           "conf_machine", "open_slurm_site", "slurm_config", "slurm_machine", "slurm_simulator"]

MACHINE_SCENARIO_KEYS = ("nodes", "cluster")
"""Scenario keys that change the machine: with slurm.conf the machine is its nodes, and a
change to them is a candidate (``conf:FILE``), not a scenario."""


class SlurmFields(TypedDict, total=False):
    """The Slurm inputs of a :class:`~hpcpolicy.whatif.WhatifConfig`, those given only."""

    slurm_conf: str
    sacctmgr: str


@dataclass(frozen=True)
class SlurmSite:
    """The site's configuration and every change a what-if compares, applied."""

    path: str
    """slurm.conf, as given."""
    sacctmgr: str | None
    """The folder of the ``sacctmgr show qos/assoc -P`` dumps, if given."""
    conf: SlurmConfig
    """The configuration as given (with the dumps' QOS and associations): the baseline."""
    changed: Mapping[str, SlurmConfig]
    """Each change, as written, -> the configuration with it applied."""
    machine: ClusterSpec
    """slurm.conf's nodes and partitions (:func:`conf_machine`)."""


def conf_machine(conf: SlurmConfig, name: str = "slurm.conf") -> ClusterSpec:
    """The machine slurm.conf defines: a node group per NodeName line, its partitions.

    Raises:
        ConfigError: slurm.conf defines no node.
    """
    if not conf.nodes:
        raise ConfigError(f"{name}: no NodeName line, so no machine to replay on; give the "
                          "slurm.conf the cluster runs with")
    groups = tuple(NodeGroup(g.names[0], len(g.names), max(g.cpus, 1),
                             nodes=",".join(g.names)) for g in conf.nodes)
    parts = tuple((p.name, p.nodes) for p in conf.partitions.values())
    return ClusterSpec(groups, name=name, source=name, partitions=parts)


def open_slurm_site(slurm_conf: str, sacctmgr: str | None,
                    changes: Iterable[str]) -> SlurmSite:
    """Read slurm.conf (and the dumps in ``sacctmgr``) and apply each change to it.

    Raises:
        ConfigError: one line naming the file, line and key, or the change, Slurm would refuse.
    """
    conf = read_slurm_conf(slurm_conf)
    if sacctmgr is not None:
        conf = with_accounting(conf, sacctmgr)
    changed = {text: apply_candidate(conf, text) for text in changes}
    return SlurmSite(slurm_conf, sacctmgr, conf, changed,
                     conf_machine(conf, Path(slurm_conf).name))


def slurm_config(slurm_conf: str | Path | None, sacctmgr: str | Path | None,
                 beside: Mapping[str, object] | None = None) -> SlurmFields:
    """The :class:`~hpcpolicy.whatif.WhatifConfig` fields (and the report config's record) of
    the Slurm inputs; nothing without slurm.conf, so a report without them reads as before.

    Args:
        slurm_conf: ``--slurm-conf``.
        sacctmgr: ``--sacctmgr``.
        beside: options that describe the site or its machine otherwise (``--site``,
            ``--cluster``, ``--procs``) -> their values; one given beside slurm.conf is refused.

    Raises:
        ConfigError: ``sacctmgr`` without ``slurm_conf``, or an option of ``beside`` given
            with it.

    Example:
        >>> slurm_config("slurm.conf", None, {"--procs": None})
        {'slurm_conf': 'slurm.conf'}
    """
    if slurm_conf is None and sacctmgr is not None:
        raise ConfigError("--sacctmgr describes the accounts of a slurm.conf: give the "
                          "site's slurm.conf with --slurm-conf too")
    given = [name for name, value in (beside or {}).items() if value is not None]
    if slurm_conf is not None and given:
        raise ConfigError(f"{given[0]} and --slurm-conf both describe the site: slurm.conf's "
                          f"nodes are the machine, so drop {given[0]} (a change to the "
                          "configuration is a candidate, -c)")
    fields = SlurmFields()
    if slurm_conf is not None:
        fields["slurm_conf"] = str(slurm_conf)
    if sacctmgr is not None:
        fields["sacctmgr"] = str(sacctmgr)
    return fields


def slurm_machine(slurm_conf: str | Path) -> ClusterSpec:
    """The machine of the slurm.conf at ``slurm_conf`` (:func:`conf_machine`).

    Raises:
        ConfigError: a file Slurm would refuse, or one with no NodeName line.
    """
    return conf_machine(read_slurm_conf(slurm_conf), Path(slurm_conf).name)


def check_slurm_scenarios(scenarios: list[Scenario], slurm_conf: str | None) -> list[Scenario]:
    """``scenarios``, once it is known that none changes the machine of a what-if on
    slurm.conf (any scenario goes without it).

    Raises:
        ConfigError: the scenario and what to write instead.
    """
    if slurm_conf is None:
        return scenarios
    for s in scenarios:
        keys = [k for k in MACHINE_SCENARIO_KEYS if k in s.changes]
        if keys:
            raise ConfigError(f"scenario {s.id!r}: with --slurm-conf the machine is "
                              f"slurm.conf's nodes, so {keys[0]}= does not apply; compare a "
                              "changed node list as a candidate (-c conf:NEW-slurm.conf)")
    return scenarios


def slurm_simulator(site: SlurmSite | None, spec: RunSpec, pooled: Simulate) -> Simulate:
    """The engine of ``spec``'s run: ``pooled`` for a policy, else the Slurm world of the
    site's configuration with ``spec.change`` applied (the configuration as given for ``""``).

    The returned function has :func:`hpcpolicy.sim.simulate`'s signature (``cluster``,
    ``cfg`` and ``running`` are the runner's: the Slurm world reads the configuration, and a
    what-if replays whole logs from an empty machine).
    """
    if spec.change is None or site is None:
        return pooled
    conf = site.changed[spec.change] if spec.change else site.conf

    def run(workload: Workload, cluster: ClusterSpec, cfg: SimConfig, *,
            running: RunningJobs | None = None) -> SimResult:
        from hpcpolicy.world.slurm import replay, slurm_world

        return replay(workload, slurm_world(conf, workload))

    return run
