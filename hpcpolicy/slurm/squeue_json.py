"""The second reading of the queue: ``squeue --json``, each job's fields that matter to a
priority change (state, partition, user, submit time, size, time limit, priority).

:mod:`hpcpolicy.slurm.queue` reads the queue first in squeue's fixed text format, fast; this
reading confirms it. JSON has no separator to forge: Slurm escapes every string, so whatever
a user typed into an account, a job name or a comment stays inside that one string, and the
numbers are numbers. It is the costlier reading (on 2,000 pending jobs 0.43 s to print 6 MB
and 0.08 s to parse, against 0.04 s for the text; ``squeue --json`` of Slurm 22.05 ignores
``--jobs`` and ``--states``, so it always prints the whole queue). Its priority is the job
record's own, the value Slurm computed (priority/multifactor) or assigned (priority/basic),
which ``scontrol update`` replaces and ``--restore`` hands back; ``sprio`` would give the
multifactor sum only, and refuses to run under priority/basic.

The parser is :func:`json.loads` itself rather than :func:`hpcpolicy.docload.loads_json`:
this document is Slurm's, its nesting fixed at a few levels whatever users type, and the
nesting check would scan its megabytes character by character in Python.

Example:
    >>> facts = read_squeue_json()            # doctest: +SKIP
    >>> facts["41"].priority                  # doctest: +SKIP
    4294901759
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hpcpolicy.errors import SlurmError
from hpcpolicy.slurm.command import slurm_command

__all__ = ["JobFacts", "parse_squeue_json", "read_squeue_json"]


@dataclass(frozen=True)
class JobFacts:
    """One job as ``squeue --json`` gives it."""

    state: str
    partition: str
    user: str
    submit: int
    """Epoch seconds."""
    cpus: int
    nodes: int
    limit_min: int | None
    """Time limit in minutes; None when unlimited."""
    priority: int
    reason: str


def _job_id(rec: Mapping[str, Any]) -> str:
    """The id as squeue's text prints it and ``scontrol update`` takes it."""
    if rec.get("het_job_id"):
        return f"{rec['het_job_id']}+{rec['het_job_offset']}"
    task = rec.get("array_task_id")
    if rec.get("array_job_id") and task is not None:
        return f"{rec['array_job_id']}_{task}"
    if rec.get("array_job_id") and rec.get("array_task_string"):  # tasks not yet split off
        return f"{rec['array_job_id']}_[{str(rec['array_task_string']).split('%')[0]}]"
    return str(rec["job_id"])


def _plain(value: Any) -> Any:
    """A value of Slurm 22.05's JSON as it is; from later versions' JSON (data_parser
    v0.0.39 on, not run here), a wrapped number ``{"set", "infinite", "number"}`` as its
    number (None when unset or infinite) and a state list as its first, base state."""
    if isinstance(value, dict) and {"set", "infinite", "number"} <= value.keys():
        return value["number"] if value["set"] is True and value["infinite"] is False else None
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return value[0]
    return value


def _field(rec: Mapping[str, Any], key: str, kind: type) -> Any:
    """``rec[key]``, checked to be a ``kind`` (a count: an int >= 0); ValueError says which."""
    if key not in rec:
        raise ValueError(f"no {key}")
    value = _plain(rec[key])
    ok = isinstance(value, kind) and not isinstance(value, bool)
    if not ok or (kind is int and value < 0):
        raise ValueError(f"{key} {str(value)[:40]!r}, not a {'count' if kind is int else 'text'}")
    return value


def _facts(rec: Mapping[str, Any]) -> JobFacts:
    limit = _plain(rec.get("time_limit"))
    return JobFacts(state=_field(rec, "job_state", str), partition=_field(rec, "partition", str),
                    user=_field(rec, "user_name", str), submit=_field(rec, "submit_time", int),
                    cpus=_field(rec, "cpus", int), nodes=_field(rec, "node_count", int),
                    limit_min=None if limit is None else _field(rec, "time_limit", int),
                    priority=_field(rec, "priority", int),
                    reason=_field(rec, "state_reason", str))


def parse_squeue_json(text: str) -> dict[str, JobFacts | str]:
    """Job id -> its facts, or why its record cannot be read (that job alone is refused).

    Raises:
        SlurmError: the text is not squeue's JSON, or Slurm reported an error in it.
    """
    try:
        doc = json.loads(text)
        records, errors = doc["jobs"], doc.get("errors") or []
        if not isinstance(records, list) or not isinstance(errors, list):
            raise TypeError("jobs")
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise SlurmError(f"`squeue --json` printed something else than Slurm's JSON ({exc}); "
                         "advise confirms every job through it: it needs Slurm 21.08 or later "
                         "with the JSON serializer plugin (Debian: slurm-wlm-basic-plugins)"
                         ) from None
    for err in errors:
        why = err.get("description") or err.get("error") if isinstance(err, dict) else err
        raise SlurmError(f"Slurm is not reachable: `squeue --json` reported {why!r}; start "
                         "slurmctld or point SLURM_CONF at the cluster's slurm.conf")
    facts: dict[str, JobFacts | str] = {}
    for rec in records:
        try:
            job_id = _job_id(rec)
        except (KeyError, TypeError, AttributeError):
            continue  # no id: nothing to confirm a job of the text with
        try:
            got: JobFacts | str = _facts(rec)
        except ValueError as exc:
            got = f"`squeue --json` gives {exc}"
        if job_id in facts:
            got = "`squeue --json` lists it twice"
        facts[job_id] = got
    return facts


def read_squeue_json(env: Mapping[str, str] | None = None) -> dict[str, JobFacts | str]:
    """Run ``squeue --json`` and :func:`parse_squeue_json` it.

    Raises:
        SlurmError: Slurm unreachable, no JSON output on this Slurm, or not its JSON.
    """
    return parse_squeue_json(slurm_command(["squeue", "--json"], env))
