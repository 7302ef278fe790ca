"""A snapshot of a live Slurm: its pending and running jobs (``squeue``) and its nodes
(``sinfo``), read so that nothing a cluster user types can change a number advise acts on.

Both are read in fixed ``--format`` text: on 2,000 pending jobs ``squeue --json`` printed
6-13 MB and took most of an advise pass (BENCHMARKS.md), the text 0.04 s. The text format
asks for no field a user types (account, job name, comment, work directory): users, node and
partition names are the administrator's, so no value can hold the ``|`` separator or a
newline and shift another field or forge another job's line; an account of
``physics|<epoch>|...|4294967000`` is simply never printed. Every field is then checked for
its type and range (job id pattern, state, epoch times, cpus, nodes, time limit, a priority
within Slurm's 32 bits); a line that fails is left out of the pass and named in
:attr:`Snapshot.skipped`, never the end of the pass for everyone.

:func:`read_snapshot` then confirms every pending job against a second reading,
``squeue --json`` (:mod:`hpcpolicy.slurm.squeue_json`, where Slurm escapes every string):
a job whose state, partition, user, submit time, cpus, nodes, time limit or priority differ
between the two readings (or that the second lacks) is refused for this pass, with a note.
Running jobs are not confirmed: they only feed the predicted starts.

Only the fields a policy may see are kept: what the scheduler knew at submit time, never how
long a job will really run.

Example:
    >>> snap = read_snapshot()  # doctest: +SKIP
    >>> len(snap.pending), snap.total_cores(("batch",))  # doctest: +SKIP
    (12, 64)
"""

from __future__ import annotations

import os
import re
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TypeVar

from hpcpolicy.errors import SlurmError
from hpcpolicy.ingest.slurm_fields import duration_seconds
from hpcpolicy.slurm.command import slurm_command
from hpcpolicy.slurm.squeue_json import JobFacts, read_squeue_json

__all__ = ["HELD_REASONS", "MAX_PRIORITY", "NO_LIMIT_S", "SINFO_FORMAT", "SQUEUE_FORMAT", "Job",
           "Node", "Skipped", "Snapshot", "cross_check", "limit_seconds", "parse_snapshot",
           "read_snapshot"]

T = TypeVar("T")

NO_LIMIT_S = 365 * 86400
"""Time limit planned for a job without one (a year)."""
HELD_REASONS = frozenset({"JobHeldUser", "JobHeldAdmin"})
"""Pending reasons of held jobs: setting their priority would release them, so they are left
alone."""
MAX_PRIORITY = 2**32 - 1
"""The largest job priority Slurm stores (32 bits)."""
_MAX_CPUS, _MAX_NODES = 10**8, 10**6
"""Far above any machine's cores and nodes: a larger count is not a job's."""
_MAX_EPOCH = 2**32
"""Epoch seconds of the year 2106: the latest an expected start may be."""
_CLOCK_SKEW_S = 86400
"""How far past the snapshot's clock a submit or start time may lie (clocks differ)."""


@dataclass(frozen=True)
class Job:
    """One pending or running job, as the scheduler knows it."""

    job_id: str
    """The id ``scontrol update JobId=`` takes (``123``, ``123_4``, ``123+0``)."""
    state: str
    """``PENDING`` or ``RUNNING``."""
    partition: str
    user: str
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
class Skipped:
    """A job (or a line) left out of a pass, and why."""

    job_id: str | None
    """The job's id; None for a line without a readable one."""
    why: str

    def describe(self) -> str:
        """One line: the job and why."""
        return self.why if self.job_id is None else f"job {self.job_id}: {self.why}"


@dataclass(frozen=True)
class Snapshot:
    """Pending and running jobs, and the nodes, at one moment."""

    now: int
    """Epoch seconds when the snapshot was taken."""
    pending: tuple[Job, ...]
    """In submit order."""
    running: tuple[Job, ...]
    nodes: tuple[Node, ...]
    skipped: tuple[Skipped, ...] = ()
    """Lines and jobs left out: unreadable, or not confirmed by the second reading."""

    def total_cores(self, partitions: Sequence[str]) -> int:
        """Cores of the nodes in any of ``partitions`` (all nodes when empty)."""
        return sum(n.cpus for n in self._nodes(partitions))

    def node_count(self, partitions: Sequence[str]) -> int:
        """Nodes in any of ``partitions`` (all nodes when empty)."""
        return len(self._nodes(partitions))

    def _nodes(self, partitions: Sequence[str]) -> list[Node]:
        want = set(partitions)
        return [n for n in self.nodes if not want or want.intersection(n.partitions)]


SQUEUE_FORMAT = "%i|%T|%P|%u|%V|%S|%C|%D|%l|%Q|%r"
"""``squeue --format``: id, state, partition, user, submit, start, cpus, nodes, time limit,
priority, reason; no field a user types."""
SINFO_FORMAT = "%N|%c|%C|%P|%T"
"""``sinfo --Node --format``: node, cpus, cpus alloc/idle/other/total, partition, state."""
_UNLIMITED = frozenset({"UNLIMITED", "INFINITE", "NOT_SET", "N/A", ""})
_JOB_ID = re.compile(r"[0-9]+(?:_[0-9]+|_\[[0-9,\-]+(?:%[0-9]+)?\]|\+[0-9]+)?")
"""A job id as squeue prints it: ``123``, ``123_4``, ``123_[1-9%2]``, ``123+0``."""
_NAME = re.compile(r"[A-Za-z0-9_.][A-Za-z0-9_.@$\-]*")
"""A user or node name (POSIX names, and the ``@`` and ``$`` of directory-service names)."""
_PARTITIONS = re.compile(r"[A-Za-z0-9_.\-]+(?:,[A-Za-z0-9_.\-]+)*")
_REASON = re.compile(r"[\x20-\x7b\x7d\x7e]*")
"""Printable ASCII but the separator."""


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
        raise ValueError(f"time limit {text!r} is not a duration")
    return seconds


def _text(value: str, what: str, pattern: re.Pattern[str]) -> str:
    if pattern.fullmatch(value) is None:
        raise ValueError(f"{what} {value[:40]!r} holds characters no {what} has")
    return value


def _count(value: str, what: str, high: int, low: int = 0) -> int:
    """``value`` as a whole number in ``[low, high]``; ValueError naming ``what`` if not."""
    digits = value.isascii() and value.isdigit() and len(value) <= 20
    if not digits or not low <= int(value) <= high:
        raise ValueError(f"{what} {value[:40]!r} is not a number from {low} to {high}")
    return int(value)


def _job(line: str, now: int) -> Job:
    fields = line.split("|")
    if len(fields) != 11:
        raise ValueError(f"{len(fields)} fields where squeue prints 11")
    job_id, state, partition, user, submit, start, cpus, nodes, limit, priority, reason = fields
    _text(job_id, "job id", _JOB_ID)
    if state not in ("PENDING", "RUNNING"):
        raise ValueError(f"state {state[:40]!r} is not PENDING or RUNNING")
    if "_[" in job_id:  # array tasks not yet split off: scontrol takes the ranges, no throttle
        job_id = job_id.split("%")[0] + ("]" if "%" in job_id else "")
    latest = now + _CLOCK_SKEW_S
    return Job(job_id=job_id, state=state, partition=_text(partition, "partition", _PARTITIONS),
               user=_text(user, "user", _NAME), submit=_count(submit, "submit time", latest, 1),
               cpus=max(_count(cpus, "cpus", _MAX_CPUS), 1),
               nodes=max(_count(nodes, "nodes", _MAX_NODES), 1), limit_s=limit_seconds(limit),
               priority=_count(priority, "priority", MAX_PRIORITY),
               reason=_text(reason, "reason", _REASON),
               start=_start(start, state, latest))


def _start(text: str, state: str, latest: int) -> int:
    """A running job's start (epoch s); 0 for a pending one, whose field is Slurm's
    expected start (``N/A``, or any epoch)."""
    if state == "RUNNING":
        return _count(text, "start time", latest, 1)
    if text != "N/A":
        _count(text, "expected start time", _MAX_EPOCH)
    return 0


def _node(line: str, now: int) -> Node:
    fields = line.split("|")
    if len(fields) != 5:
        raise ValueError(f"{len(fields)} fields where sinfo prints 5")
    name, cpus, cpu_states, partition, state = fields
    alloc = cpu_states.split("/")[0]
    return Node(name=_text(name, "node", _NAME), cpus=_count(cpus, "cpus", _MAX_CPUS),
                alloc_cpus=_count(alloc, "allocated cpus", _MAX_CPUS),
                partitions=(_text(partition.rstrip("*"), "partition", _PARTITIONS),),
                state=_text(state, "state", _REASON))  # '*' marks the default partition


def _lines(cmd: str, fmt: str, text: str, now: int,
           parse: Callable[[str, int], T]) -> tuple[list[T], list[Skipped]]:
    """``parse`` of each non-empty line of what ``cmd`` printed in format ``fmt``, and the
    lines that failed, each named (with its job id when it has one).

    Raises:
        SlurmError: no line at all could be read (``cmd`` printed another format).
    """
    out, bad, lines = [], [], [line for line in text.splitlines() if line.strip()]
    for line in lines:
        try:
            out.append(parse(line, now))
        except ValueError as exc:
            first = line.split("|", 1)[0]
            job_id = first if cmd == "squeue" and _JOB_ID.fullmatch(first) else None
            bad.append(Skipped(job_id, f"`{cmd}` printed {line[:120]!r}: {exc}; left out"))
    if bad and not out:
        raise SlurmError(f"`{cmd}` printed a line advise cannot read: {lines[0][:120]!r} "
                         f"(expected the fields of {fmt!r})")
    return out, bad

def _once(jobs: list[Job]) -> tuple[list[Job], list[Skipped]]:
    """The jobs whose id squeue printed once; a repeated id is refused, every copy."""
    seen = Counter(j.job_id for j in jobs)
    twice = [Skipped(i, "`squeue` printed this id on several lines; left out") for i, n in
             seen.items() if n > 1]
    return [j for j in jobs if seen[j.job_id] == 1], twice


def parse_snapshot(squeue: str, sinfo: str, now: int) -> Snapshot:
    """A snapshot from what ``squeue --format`` :data:`SQUEUE_FORMAT` and ``sinfo --Node
    --format`` :data:`SINFO_FORMAT` print (times as epoch seconds, ``SLURM_TIME_FORMAT=%s``).
    A line whose fields fail their checks is left out, and named in ``skipped``.

    Raises:
        SlurmError: no line of either output is in its format (the message quotes one).
    """
    jobs, bad_jobs = _lines("squeue", SQUEUE_FORMAT, squeue, now, _job)
    jobs, twice = _once(jobs)
    found, bad_nodes = _lines("sinfo", SINFO_FORMAT, sinfo, now, _node)
    nodes: dict[str, Node] = {}
    for node in found:  # a line per node and partition
        if (seen := nodes.get(node.name)) is not None:
            node = replace(seen, partitions=(*seen.partitions, *node.partitions))
        nodes[node.name] = node
    # squeue lists by priority; a policy's workload is in submit order
    pending = sorted((j for j in jobs if j.state == "PENDING"), key=lambda j: j.submit)
    return Snapshot(now=now, pending=tuple(pending),
                    running=tuple(j for j in jobs if j.state == "RUNNING"),
                    nodes=tuple(nodes.values()), skipped=(*bad_jobs, *twice, *bad_nodes))


def _differs(job: Job, facts: JobFacts) -> str | None:
    """The first field the two readings disagree on, in words; None when they agree."""
    limit_s = NO_LIMIT_S if facts.limit_min is None else facts.limit_min * 60
    pairs = (("state", job.state, facts.state), ("partition", job.partition, facts.partition),
             ("user", job.user, facts.user), ("submit time", job.submit, facts.submit),
             ("cpus", job.cpus, max(facts.cpus, 1)), ("nodes", job.nodes, max(facts.nodes, 1)),
             ("time limit (s)", job.limit_s, limit_s),
             ("priority", job.priority, facts.priority),
             ("hold", job.held, facts.priority == 0 or facts.reason in HELD_REASONS))
    for what, text, second in pairs:
        if text != second:
            return f"squeue's text gives its {what} as {text!r}, `squeue --json` as {second!r}"
    return None


def cross_check(snap: Snapshot, facts: Mapping[str, JobFacts | str]) -> Snapshot:
    """``snap`` with only the pending jobs that ``facts`` (the second reading, job id ->
    :class:`~hpcpolicy.slurm.squeue_json.JobFacts` or why it is unreadable) confirms field
    for field; each other one is moved to ``skipped``, saying why. The two readings are
    moments apart, so a job that changed in between is refused too, until the next pass."""
    kept, refused = [], []
    for job in snap.pending:
        got = facts.get(job.job_id)
        if got is None:
            why = ("`squeue --json` does not list it (it ended or changed between the two "
                   "readings); left alone this pass")
        elif isinstance(got, str):
            why = f"{got}; left alone"
        elif (diff := _differs(job, got)) is not None:
            why = f"{diff}; left alone this pass"
        else:
            kept.append(job)
            continue
        refused.append(Skipped(job.job_id, why))
    return replace(snap, pending=tuple(kept), skipped=(*snap.skipped, *refused))


def read_snapshot(env: Mapping[str, str] | None = None) -> Snapshot:
    """Read the live cluster: its pending and running jobs (``squeue``) and its nodes
    (``sinfo``) in fixed text formats, each pending job confirmed by ``squeue --json``
    (:func:`cross_check`; see the module docstring).

    Raises:
        SlurmError: Slurm is not reachable, printed something else than asked, or has no
            JSON output to confirm the jobs with.
    """
    env = {**(os.environ if env is None else env), "SLURM_TIME_FORMAT": "%s"}
    squeue = slurm_command(["squeue", "--noheader", "--states=PENDING,RUNNING",
                            f"--format={SQUEUE_FORMAT}"], env)
    sinfo = slurm_command(["sinfo", "--Node", "--noheader", f"--format={SINFO_FORMAT}"], env)
    snap = parse_snapshot(squeue, sinfo, int(time.time()))
    return cross_check(snap, read_squeue_json(env))
