"""A snapshot of a live Slurm: the jobs of ``squeue --json`` and the nodes of ``sinfo --json``.

``squeue --json`` lists every job slurmctld still holds (it ignores ``-t PD`` and keeps
finished jobs for ``MinJobAge``), so pending and running jobs are picked out here; its
``time_limit`` is in minutes (absent: no limit). Only the fields a policy may see are kept:
what the scheduler knew at submit time, never how long a job will really run.

Example:
    >>> snap = read_snapshot()  # doctest: +SKIP
    >>> len(snap.pending), snap.total_cores(("batch",))  # doctest: +SKIP
    (12, 64)
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hpcpolicy.errors import SlurmError
from hpcpolicy.slurm.command import slurm_command

__all__ = ["HELD_REASONS", "NO_LIMIT_S", "Job", "Node", "Snapshot", "parse_snapshot",
           "read_snapshot"]

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
    """One node of ``sinfo --json``."""

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


def _job_id(j: Mapping[str, Any]) -> str:
    if j.get("het_job_id"):
        return f"{j['het_job_id']}+{j['het_job_offset']}"
    task = j.get("array_task_id")
    if j.get("array_job_id") and task is not None:
        return f"{j['array_job_id']}_{task}"
    if j.get("array_job_id") and j.get("array_task_string"):  # tasks not yet split off
        return f"{j['array_job_id']}_[{str(j['array_task_string']).split('%')[0]}]"
    return str(j["job_id"])


def _job(j: Mapping[str, Any]) -> Job:
    limit = j.get("time_limit")
    return Job(
        job_id=_job_id(j), state=str(j["job_state"]), partition=str(j.get("partition") or ""),
        user=str(j.get("user_name") or j.get("user_id") or ""),
        account=str(j.get("account") or ""), submit=int(j.get("submit_time") or 0),
        cpus=max(int(j.get("cpus") or 1), 1), nodes=max(int(j.get("node_count") or 1), 1),
        limit_s=NO_LIMIT_S if limit is None else int(limit) * 60,
        priority=int(j.get("priority") or 0), reason=str(j.get("state_reason") or ""),
        start=int(j.get("start_time") or 0) if j["job_state"] == "RUNNING" else 0)


def _check_errors(cmd: str, doc: Mapping[str, Any]) -> None:
    """A failed load still exits 0, with the reason in the document's ``errors``."""
    for err in doc.get("errors") or ():
        raise SlurmError(f"Slurm is not reachable: `{cmd} --json` reported "
                         f"{err.get('description') or err.get('error')!r} "
                         f"({err.get('source')}); start slurmctld or point SLURM_CONF at "
                         "the cluster's slurm.conf")


def parse_snapshot(squeue: str, sinfo: str, now: int) -> Snapshot:
    """A snapshot from the text of ``squeue --json`` and ``sinfo --json``.

    Raises:
        SlurmError: either text is not the JSON those commands print.
    """
    try:
        docs = {"squeue": json.loads(squeue), "sinfo": json.loads(sinfo)}
        jobs, nodes = docs["squeue"]["jobs"], docs["sinfo"]["nodes"]
    except (ValueError, KeyError, TypeError) as exc:
        raise SlurmError(f"squeue/sinfo --json printed something else than their JSON "
                         f"({exc}); this Slurm's JSON output is not supported (Slurm 22.05 or "
                         "later)") from None
    for cmd, doc in docs.items():
        _check_errors(cmd, doc)
    pending, running = [], []
    for j in jobs:
        state = j.get("job_state")
        if state == "PENDING":
            pending.append(_job(j))
        elif state == "RUNNING":
            running.append(_job(j))
    return Snapshot(
        now=now, pending=tuple(pending), running=tuple(running),
        nodes=tuple(Node(name=str(n["name"]), cpus=int(n["cpus"]),
                         alloc_cpus=int(n.get("alloc_cpus") or 0),
                         partitions=tuple(n.get("partitions") or ()),
                         state=str(n.get("state") or "")) for n in nodes))


def _json_of(cmd: str, env: Mapping[str, str] | None) -> str:
    try:
        text = slurm_command([cmd, "--json"], env)
    except SlurmError as exc:
        text = str(exc).lower()
        if "unrecognized option" in text or "invalid option" in text or "serializer" in text:
            raise SlurmError(f"this Slurm's `{cmd}` has no --json output ({exc}); advise needs "
                             "Slurm 21.08 or later with its JSON plugin "
                             "(Debian: the slurm-client package of 22.05)") from None
        raise
    if '"error_number"' in text:  # fail before asking the next command (each waits ~10 s)
        try:
            doc = json.loads(text)
        except ValueError:
            return text  # parse_snapshot says what is wrong
        _check_errors(cmd, doc)
    return text


def read_snapshot(env: Mapping[str, str] | None = None) -> Snapshot:
    """Read the live cluster (``squeue --json`` then ``sinfo --json``).

    Raises:
        SlurmError: Slurm is not reachable, or its commands have no ``--json``.
    """
    squeue = _json_of("squeue", env)
    sinfo = _json_of("sinfo", env)
    return parse_snapshot(squeue, sinfo, int(time.time()))
