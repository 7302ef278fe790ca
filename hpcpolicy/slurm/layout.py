"""The node layout the Slurm flavour of the replay needs (``--compat slurm``): node names,
cores per node, and each partition's node set, from a cluster spec or from the log itself.

From a spec (``--cluster``) that has ``[partitions]``: everything is the spec's; a partition
lists group names (all the group's nodes) and node names in Slurm's hostlist form
(``n[3-4]``), node names coming from each group's ``nodes`` key.

Otherwise from the log: the nodes are those its ``NodeList`` names (in natural order, n2
before n10), each partition is the set of nodes its jobs ran on, and the cores per node are
the spec's (one node size), ``--procs`` over the nodes, or else the least the log proves: the
largest share ``ceil(cores / nodes)`` of any job. Both inferences can only fall short (a node
no job of a partition used is not in it; nodes may be larger than any job's share), and the
layout's notes say so.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from hpcpolicy.cluster import ClusterSpec, NodeGroup
from hpcpolicy.errors import ConfigError
from hpcpolicy.hostlist import expand_hostlist
from hpcpolicy.sim.types import SimResult
from hpcpolicy.sim.windows import Simulate
from hpcpolicy.slurm.replay import SlurmReplayConfig, slurm_replay
from hpcpolicy.workload import Workload

__all__ = ["SlurmLayout", "layout_from_log", "layout_from_spec", "slurm_layout"]

_NODELIST_BUDGET = 10_000_000
"""Most node names all of a log's distinct NodeLists may expand to, together (about 600 MB of
names): above a real log (a million jobs name a few million), far below what a forged log
could ask."""


def _natural(name: str) -> list[Any]:
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name)]


@dataclass(frozen=True)
class SlurmLayout:
    """Nodes of one size and the partitions' node sets, as the Slurm flavour replays them."""

    nodes: tuple[str, ...]
    """Node names; a node's index is its position here."""
    cores_per_node: int
    partitions: Mapping[str, tuple[int, ...]]
    """Partition name -> indices of its nodes."""
    source: str
    """Where the layout came from, in words (shown by the commands)."""
    notes: tuple[str, ...] = ()
    """What was inferred, and how it may fall short."""

    def cluster(self, name: str | None = None) -> ClusterSpec:
        """The same machine as a :class:`ClusterSpec` (for the figures that need its size),
        its notes saying that the Slurm flavour replays on it, and what was inferred."""
        return ClusterSpec((NodeGroup("nodes", len(self.nodes), self.cores_per_node),),
                           name=name or f"{len(self.nodes)} nodes x {self.cores_per_node} "
                           "cores", source=self.source,
                           notes=("replayed as Slurm schedules it (--compat slurm: "
                                  "priority/basic and sched/backfill, shown as fcfs and "
                                  f"conservative): {self.describe()}", *self.notes))

    def describe(self) -> str:
        """One line: the nodes and each partition's node count."""
        parts = ", ".join(f"{p} {len(n)}" for p, n in self.partitions.items())
        return (f"{len(self.nodes)} nodes x {self.cores_per_node} cores; nodes per partition: "
                f"{parts} (from {self.source})")

    def check(self, w: Workload) -> None:
        """Raise a one-line ConfigError for the first job that could never start here.

        Raises:
            ConfigError: the log names no partition, a job's partition has no node set, or
                a job asks for more nodes or cores than its partition has.
        """
        if not w.partitions:
            raise ConfigError("--compat slurm needs each job's partition; the log has no "
                              "Partition column")
        for code, name in enumerate(w.partitions):
            if name not in self.partitions:
                raise ConfigError(f"partition {name!r} of the log has no nodes in the layout "
                                  f"({self.source}); name it under [partitions] in --cluster")
            sel = np.flatnonzero(w.partition == code)
            have = len(self.partitions[name])
            nodes = np.maximum(w.nodes[sel], 1)
            for need, what, cap in ((nodes, "nodes", have),
                                    (w.procs[sel], "cores", have * self.cores_per_node),
                                    (-(-w.procs[sel] // nodes), "cores per node",
                                     self.cores_per_node)):
                bad = np.flatnonzero(need > cap)
                if bad.size:
                    j = int(sel[bad[0]])
                    raise ConfigError(
                        f"job {w.job_id[j]} asks for {int(need[bad[0]])} {what}; partition "
                        f"{name!r} has {cap} ({self.source}); fix the layout in --cluster")

    def replay(self, w: Workload, cfg: SlurmReplayConfig | None = None) -> SimResult:
        """:func:`~hpcpolicy.slurm.replay.slurm_replay` of ``w`` on this layout (``cfg``'s
        node count and size replaced by the layout's)."""
        self.check(w)
        base = cfg or SlurmReplayConfig()
        return slurm_replay(w, replace(base, nodes=len(self.nodes),
                                       cores_per_node=self.cores_per_node), self.partitions)

    def simulator(self, cfg: SlurmReplayConfig | None = None) -> Simulate:
        """An engine with :func:`hpcpolicy.sim.simulate`'s signature for
        :func:`hpcpolicy.sim.windows.replay`; the cluster and SimConfig are not read (the
        layout and Slurm's own order and backfill replace them)."""
        def simulate(w: Workload, _cluster: ClusterSpec, _cfg: Any, *,
                     running: Any = None) -> SimResult:
            if running is not None and len(running):
                raise ConfigError("--compat slurm replays from an empty machine; drop --warm")
            return self.replay(w, cfg)
        return simulate


def _node_indices(names: list[str], where: Mapping[str, int], source: str) -> tuple[int, ...]:
    missing = [n for n in names if n not in where]
    if missing:
        raise ConfigError(f"{source}: node {missing[0]!r} is not a node of the layout "
                          f"({len(where)} nodes)")
    return tuple(sorted({where[n] for n in names}))


def _spec_nodes(spec: ClusterSpec) -> tuple[list[str], dict[str, list[str]]]:
    """The spec's node names (a group without ``nodes`` gets none) and each group's."""
    names: list[str] = []
    by_group: dict[str, list[str]] = {}
    for g in spec.groups:
        own = expand_hostlist(g.nodes) if g.nodes else [f"{g.name}#{k + 1}" for k in
                                                        range(g.count)]
        by_group[g.name] = own
        names.extend(own)
    return names, by_group


def _one_size(spec: ClusterSpec) -> int:
    sizes = {g.cores for g in spec.groups}
    if len(sizes) > 1 or spec.total_gpus:
        raise ConfigError(f"{spec.source}: the Slurm flavour replays nodes of one size without "
                          f"GPUs; its groups have {sorted(sizes)} cores"
                          + (f" and {spec.total_gpus} GPUs" if spec.total_gpus else ""))
    return sizes.pop()


def layout_from_spec(spec: ClusterSpec) -> SlurmLayout:
    """The layout a cluster spec with ``partitions`` states.

    Raises:
        ConfigError: groups of several sizes or with GPUs, or a partition naming a node or
            group the spec lacks.
    """
    cores = _one_size(spec)
    names, by_group = _spec_nodes(spec)
    where = {n: i for i, n in enumerate(names)}
    parts = {}
    for part, members in spec.partitions:
        listed = [n for m in members for n in by_group.get(m, [m])]
        parts[part] = _node_indices(listed, where, f"{spec.source}: partitions.{part}")
    return SlurmLayout(tuple(names), cores, parts, source=spec.source)


def layout_from_log(table: str | Path, w: Workload, spec: ClusterSpec | None = None,
                    procs: int | None = None) -> SlurmLayout:
    """The layout inferred from the log's ``node_list`` and ``partition`` (see the module
    docstring); ``spec`` or ``procs`` give the nodes' size when the log cannot.

    Raises:
        ConfigError: the table has no node lists, a node list is not a hostlist, or the
            spec's nodes do not match the log's.
    """
    import polars as pl

    frame = pl.read_parquet(table)
    if "node_list" not in frame.columns or frame["node_list"].is_null().all():
        raise ConfigError(f"{table}: --compat slurm needs the node layout and the log has no "
                          "NodeList to infer it from; give --cluster FILE with [partitions] "
                          "(see examples/slurm-test.toml)")
    lists = dict(zip(frame["job_id"].cast(pl.Utf8).to_list(), frame["node_list"].to_list(),
                     strict=True))
    ran: dict[str, set[str]] = {p: set() for p in w.partitions}
    expanded: dict[str, list[str]] = {}  # a NodeList repeats across jobs: expanded once
    budget = _NODELIST_BUDGET
    for j in range(len(w)):
        text = lists.get(str(w.job_id[j]))
        if text and w.partitions:
            if text not in expanded:
                try:  # each list at most MAX_HOSTLIST names, counted before expanding
                    expanded[text] = expand_hostlist(text)
                except ConfigError as exc:
                    raise ConfigError(f"{table}: job {w.job_id[j]}'s NodeList: {exc}") from None
                budget -= len(expanded[text])
                if budget < 0:
                    raise ConfigError(
                        f"{table}: the log's NodeLists name more than "
                        f"{_NODELIST_BUDGET:,} nodes in all (job {w.job_id[j]}: "
                        f"{text[:80]!r}); give --cluster FILE with [partitions] instead")
            ran[w.partitions[w.partition[j]]].update(expanded[text])
    seen = sorted(set().union(*ran.values()), key=_natural)
    notes = ["each partition's nodes are those its jobs ran on in the log (a node none of "
             "them used is left out); name them under [partitions] in --cluster if not"]
    if spec is not None:
        cores = _one_size(spec)
        names = _spec_nodes(spec)[0] if any(g.nodes for g in spec.groups) else seen
        if len(names) != spec.total_nodes:
            raise ConfigError(f"{spec.source}: {spec.total_nodes} nodes, but the log ran jobs "
                              f"on {len(seen)}; name the nodes with a group's `nodes` key")
        source = f"the log's NodeList and {spec.source}"
    else:
        names = seen
        share = int((-(-w.procs // np.maximum(w.nodes, 1))).max()) if len(w) else 1
        if procs is not None:
            if procs % max(len(names), 1):
                raise ConfigError(f"--procs {procs} does not divide over the log's "
                                  f"{len(names)} nodes; give --cluster FILE")
            cores = procs // max(len(names), 1)
        else:
            cores = share
            notes.append(f"cores per node inferred as {cores}, the largest share of a job "
                         "on one node; give --cluster FILE or --procs N if nodes are larger")
        source = "the log's NodeList"
    if not names:
        raise ConfigError(f"{table}: no job has a NodeList; give --cluster FILE with "
                          "[partitions]")
    where = {n: i for i, n in enumerate(names)}
    parts = {p: _node_indices(sorted(ran[p], key=_natural), where, f"{table}: NodeList")
             for p in w.partitions}
    return SlurmLayout(tuple(names), cores, parts, source=source, notes=tuple(notes))


def slurm_layout(table: str | Path, w: Workload, spec: ClusterSpec | None = None,
                 procs: int | None = None) -> SlurmLayout:
    """The layout for ``--compat slurm``: the spec's when it has ``partitions``, else the
    log's (:func:`layout_from_log`); checked against the jobs (:meth:`SlurmLayout.check`).

    Raises:
        ConfigError: see :func:`layout_from_spec`, :func:`layout_from_log` and
            :meth:`SlurmLayout.check`.
    """
    if spec is not None and procs is not None:
        raise ConfigError("--cluster and --procs both describe the machine; give only one")
    layout = (layout_from_spec(spec) if spec is not None and spec.partitions
              else layout_from_log(table, w, spec, procs))
    layout.check(w)
    return layout
