"""From slurm.conf's lines to the configuration model: DEFAULT lines, nodes, partitions.

``NodeName=DEFAULT`` and ``PartitionName=DEFAULT`` set values for the lines *below* them
(later DEFAULT lines add to or override earlier ones), as Slurm's ``_parse_nodename`` and
``_parse_partitionname`` keep them. A whole-file key written twice keeps its last value
("specified more than once, latest value used", parse_config.c). Keys Slurm does not know
are kept in :attr:`SlurmConfig.unknown` and never stop the reading.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from hpcpolicy.errors import ConfigError
from hpcpolicy.slurmconf.model import NodeGroup, NodeIndex, Partition, Setting, SlurmConfig
from hpcpolicy.slurmconf.names import GLOBAL, NODE, PARTITION, canonical
from hpcpolicy.slurmconf.reader import Line, read_lines
from hpcpolicy.slurmconf.typed import hostnames, partition_of, priority_of, scheduler_of
from hpcpolicy.slurmconf.values import slurm_uint

__all__ = ["read_slurm_conf", "with_settings"]

_CPU_PARTS = ("Boards", "Sockets", "CoresPerSocket", "ThreadsPerCore")
_NODE_LINE = {**NODE, "nodename": "NodeName"}
_PARTITION_LINE = {**PARTITION, "partitionname": "PartitionName"}


def _keyed(pairs: tuple[Setting, ...], table: Mapping[str, str],
           unknown: list[Setting]) -> dict[str, Setting]:
    """The pairs by Slurm's spelling; those Slurm does not know go to ``unknown``."""
    out: dict[str, Setting] = {}
    for pair in pairs:
        key = canonical(pair.key, table)
        if key is None:
            unknown.append(pair)
        else:
            out[key] = replace(pair, key=key)
    return out


def _node_group(own: dict[str, Setting], defaults: dict[str, Setting],
                line: Line) -> NodeGroup:
    merged = {**defaults, **own}

    def number(key: str, default: int) -> int:
        s = merged.get(key)
        return default if s is None else slurm_uint(s.value, s.where(), unlimited=False) or 0

    cpus = number("CPUs", 0) or number("Procs", 0)
    if not cpus:
        cpus = 1
        for part in _CPU_PARTS:
            cpus *= number(part, 1)
    return NodeGroup(names=hostnames(own["NodeName"]), cpus=cpus,
                     real_memory_mib=number("RealMemory", 1), settings=merged,
                     source=line.source)


class _Builder:
    """Walks the lines once, keeping the DEFAULT values in force."""

    def __init__(self) -> None:
        self.settings: dict[str, Setting] = {}
        self.unknown: list[Setting] = []
        self.nodes: list[NodeGroup] = []
        self.nodesets: dict[str, Setting] = {}
        self.partition_lines: list[tuple[dict[str, Setting], Line]] = []
        self.defaults: dict[str, dict[str, Setting]] = {"NodeName": {}, "PartitionName": {}}

    def add(self, line: Line) -> None:
        head = canonical(line.pairs[0].key, GLOBAL)
        if head == "NodeName":
            own = _keyed(line.pairs, _NODE_LINE, self.unknown)
            self._define("NodeName", own, line)
        elif head == "PartitionName":
            own = _keyed(line.pairs, _PARTITION_LINE, self.unknown)
            self._define("PartitionName", own, line)
        elif head == "NodeSet":  # NodeSet=name Nodes=hostlist, or Feature=feature
            self.nodesets[line.pairs[0].value] = next(
                (p for p in line.pairs[1:] if p.key.lower() in ("nodes", "feature")),
                line.pairs[0])
        elif head is None:
            self.unknown.extend(line.pairs)
        else:
            self.settings[head] = replace(line.pairs[0], key=head)

    def _define(self, kind: str, own: dict[str, Setting], line: Line) -> None:
        if own[kind].value.upper() == "DEFAULT":
            self.defaults[kind].update({k: v for k, v in own.items() if k != kind})
        elif kind == "NodeName":
            self.nodes.append(_node_group(own, self.defaults[kind], line))
        else:
            self.partition_lines.append(({**self.defaults[kind], **own}, line))

    def _featured(self, feature: str) -> tuple[str, ...]:
        """The nodes whose Feature (or Features) list holds ``feature``."""
        return tuple(n for g in self.nodes for n in g.names
                     if feature in (g.settings.get("Feature") or g.settings.get("Features")
                                    or Setting("", "", g.source)).value.split(","))

    def node_index(self) -> NodeIndex:
        """Every node defined, and the nodes of each NodeSet."""
        every = tuple(dict.fromkeys(n for group in self.nodes for n in group.names))
        sets = {name: hostnames(s) if s.key.lower() == "nodes" else self._featured(s.value)
                for name, s in self.nodesets.items()}
        return NodeIndex(every, sets)

    def partitions(self) -> dict[str, Partition]:
        index = self.node_index()
        out: dict[str, Partition] = {}
        for merged, line in self.partition_lines:
            name = merged["PartitionName"].value
            if name in out:
                raise ConfigError(f"{line.source}: partition {name} is defined again (first "
                                  f"at {out[name].source}); merge the two lines")
            own = frozenset(canonical(p.key, _PARTITION_LINE) or p.key for p in line.pairs)
            out[name] = partition_of(name, merged, own, line.source, index)
        return out


def read_slurm_conf(path: str | Path) -> SlurmConfig:
    """Read a site's slurm.conf (and the files it includes) into the configuration model.

    Args:
        path: the slurm.conf.

    Returns:
        The typed configuration; keys Slurm does not know are listed in ``unknown``.

    Raises:
        ConfigError: one line naming ``file:line:key`` and the fix, for what Slurm refuses.

    Example:
        >>> import pathlib, tempfile
        >>> conf = pathlib.Path(tempfile.mkdtemp()) / "slurm.conf"
        >>> _ = conf.write_text("PriorityWeightAge=1000\\nNodeName=n[1-4] CPUs=8\\n"
        ...                     "PartitionName=batch Nodes=ALL MaxTime=2-0\\n")
        >>> c = read_slurm_conf(conf)
        >>> c.priority.weights["Age"], c.node_count, c.partitions["batch"].max_time_s
        (1000, 4, 172800)
    """
    lines, texts = read_lines(Path(path))
    builder = _Builder()
    for line in lines:
        builder.add(line)
    return SlurmConfig(settings=builder.settings, priority=priority_of(builder.settings),
                       scheduler=scheduler_of(builder.settings), nodes=tuple(builder.nodes),
                       partitions=builder.partitions(), unknown=tuple(builder.unknown),
                       files=texts, node_index=builder.node_index())


def with_settings(config: SlurmConfig, settings: Mapping[str, Setting],
                  partitions: Mapping[str, Mapping[str, Setting]]) -> SlurmConfig:
    """``config`` with new whole-file settings and partition settings, typed again (so a
    changed value is checked as a written one).

    Args:
        config: the configuration changed.
        settings: every whole-file setting of the new configuration.
        partitions: partition name -> its new settings, for the partitions changed.
    """
    new_parts = dict(config.partitions)
    for name, values in partitions.items():
        old = new_parts[name]
        new_parts[name] = partition_of(name, values, old.own | (values.keys() - old.settings),
                                       old.source, config.node_index)
    return replace(config, settings=dict(settings), priority=priority_of(settings),
                   scheduler=scheduler_of(settings), partitions=new_parts)
