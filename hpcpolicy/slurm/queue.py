"""A snapshot of a live Slurm: its pending and running jobs (``squeue``) and its nodes
(``sinfo``).

Both are read in fixed ``--format`` text rather than ``--json``: on 2,000 pending jobs
``squeue --json`` printed 13 MB and took most of an advise pass (BENCHMARKS.md), and
``--json`` needs Slurm's JSON plugin. Only the fields a policy may see are kept: what the
scheduler knew at submit time, never how long a job will really run.

Example:
    >>> snap = read_snapshot()  # doctest: +SKIP
    >>> len(snap.pending), snap.total_cores(("batch",))  # doctest: +SKIP
    (12, 64)
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TypeVar

from hpcpolicy.errors import SlurmError
from hpcpolicy.ingest.slurm_fields import duration_seconds
from hpcpolicy.slurm.command import slurm_command

__all__ = ["HELD_REASONS", "NO_LIMIT_S", "SINFO_FORMAT", "SQUEUE_FORMAT", "Job", "Node",
           "Snapshot", "limit_seconds", "parse_snapshot", "read_snapshot"]

T = TypeVar("T")

NO_LIMIT_S = 365 * 86400
"""Time limit planned for a job without one (a year)."""
HELD_REASONS = frozenset({"JobHeldUser", "JobHeldAdmin"})
"""Pending reasons of held jobs: setting their priority would release them, so they are left
alone."""


@dataclass(frozen=True)
class Job:
    """One pending or running job, as the scheduler knows it."""

    job_id: str
    """The id ``scontrol update JobId=`` takes (``123``, ``123_4``, ``123+0``)."""
    state: str
    """``PENDING`` or ``RUNNING``."""
    partition: str
    user: str
    account: str
    submit: int
    """Epoch seconds."""
    cpus: int
    nodes: int
    limit_s: int
    """Time limit in seconds (:data:`NO_LIMIT_S` when unlimited)."""
    priority: int
    reason: str
    """Slurm's pending reason (``Priority``, ``Resources``, ``Dependency``, ``JobHeldUser``...)."""
    start: int
    """Epoch seconds the job started (running jobs), else 0."""

    @property
    def held(self) -> bool:
        """A held job (priority 0): never touched."""
        return self.priority == 0 or self.reason in HELD_REASONS


@dataclass(frozen=True)
class Node:
    """One node, as ``sinfo`` prints it."""

    name: str
    cpus: int
    alloc_cpus: int
    partitions: tuple[str, ...]
    state: str


@dataclass(frozen=True)
class Snapshot:
    """Pending and running jobs, and the nodes, at one moment."""

    now: int
    """Epoch seconds when the snapshot was taken."""
    pending: tuple[Job, ...]
    """In submit order."""
    running: tuple[Job, ...]
    nodes: tuple[Node, ...]

    def total_cores(self, partitions: Sequence[str]) -> int:
        """Cores of the nodes in any of ``partitions`` (all nodes when empty)."""
        return sum(n.cpus for n in self._nodes(partitions))

    def node_count(self, partitions: Sequence[str]) -> int:
        """Nodes in any of ``partitions`` (all nodes when empty)."""
        return len(self._nodes(partitions))

    def _nodes(self, partitions: Sequence[str]) -> list[Node]:
        want = set(partitions)
        return [n for n in self.nodes if not want or want.intersection(n.partitions)]


SQUEUE_FORMAT = "%i|%T|%P|%u|%a|%V|%S|%C|%D|%l|%Q|%r"
"""``squeue --format``: id, state, partition, user, account, submit, start, cpus, nodes, time
limit, priority, reason (last: the only free text)."""
SINFO_FORMAT = "%N|%c|%C|%P|%T"
"""``sinfo --Node --format``: node, cpus, cpus alloc/idle/other/total, partition, state."""
_UNLIMITED = frozenset({"UNLIMITED", "INFINITE", "NOT_SET", "N/A", ""})


def limit_seconds(text: str) -> int:
    """Seconds of a time limit as squeue prints it (``5:00``, ``1:01:00``, ``2-00:00:00``,
    ``UNLIMITED``: :data:`NO_LIMIT_S`); the forms are sacct's, read as ingest reads them.

    >>> limit_seconds("1:00"), limit_seconds("1:01:00"), limit_seconds("2-00:00:00")
    (60, 3660, 172800)

    Raises:
        ValueError: not a duration (the caller quotes the line).
    """
    if text in _UNLIMITED:
        return NO_LIMIT_S
    seconds = duration_seconds(text)
    if seconds is None:
        raise ValueError(text)
    return seconds


def _job(line: str) -> Job:
    (job_id, state, partition, user, account, submit, start, cpus, nodes, limit, priority,
     reason) = line.split("|", 11)
    if "_[" in job_id:  # array tasks not yet split off: scontrol takes the ranges, no throttle
        job_id = job_id.split("%")[0] + ("]" if "%" in job_id else "")
    return Job(job_id=job_id, state=state, partition=partition, user=user, account=account,
               submit=int(submit), cpus=max(int(cpus), 1), nodes=max(int(nodes), 1),
               limit_s=limit_seconds(limit), priority=int(priority), reason=reason,
               start=int(start) if state == "RUNNING" else 0)


def _node(line: str) -> Node:
    name, cpus, cpu_states, partition, state = line.split("|", 4)
    return Node(name=name, cpus=int(cpus), alloc_cpus=int(cpu_states.split("/")[0]),
                partitions=(partition.rstrip("*"),), state=state)  # '*': the default one


def _lines(cmd: str, fmt: str, text: str, parse: Callable[[str], T]) -> list[T]:
    """``parse`` of each non-empty line of what ``cmd`` printed in format ``fmt``."""
    out = []
    for line in text.splitlines():
        if line.strip():
            try:
                out.append(parse(line))
            except ValueError:
                raise SlurmError(f"`{cmd}` printed a line advise cannot read: {line[:120]!r} "
                                 f"(expected the fields of {fmt!r})") from None
    return out


def parse_snapshot(squeue: str, sinfo: str, now: int) -> Snapshot:
    """A snapshot from what ``squeue --format`` :data:`SQUEUE_FORMAT` and ``sinfo --Node
    --format`` :data:`SINFO_FORMAT` print (times as epoch seconds, ``SLURM_TIME_FORMAT=%s``).

    Raises:
        SlurmError: a line that is not in those formats (the message quotes it).
    """
    jobs = _lines("squeue", SQUEUE_FORMAT, squeue, _job)
    nodes: dict[str, Node] = {}
    for node in _lines("sinfo", SINFO_FORMAT, sinfo, _node):  # a line per node and partition
        if (seen := nodes.get(node.name)) is not None:
            node = replace(seen, partitions=(*seen.partitions, *node.partitions))
        nodes[node.name] = node
    # squeue lists by priority; a policy's workload is in submit order
    pending = sorted((j for j in jobs if j.state == "PENDING"), key=lambda j: j.submit)
    return Snapshot(now=now, pending=tuple(pending),
                    running=tuple(j for j in jobs if j.state == "RUNNING"),
                    nodes=tuple(nodes.values()))


def read_snapshot(env: Mapping[str, str] | None = None) -> Snapshot:
    """Read the live cluster: its pending and running jobs (``squeue``) and its nodes
    (``sinfo``), in fixed text formats (much less to print and parse than ``--json``, and the
    same on Slurm versions without a JSON plugin).

    Raises:
        SlurmError: Slurm is not reachable, or printed something else than asked.
    """
    env = {**(os.environ if env is None else env), "SLURM_TIME_FORMAT": "%s"}
    squeue = slurm_command(["squeue", "--noheader", "--states=PENDING,RUNNING",
                            f"--format={SQUEUE_FORMAT}"], env)
    sinfo = slurm_command(["sinfo", "--Node", "--noheader", f"--format={SINFO_FORMAT}"], env)
    return parse_snapshot(squeue, sinfo, int(time.time()))
