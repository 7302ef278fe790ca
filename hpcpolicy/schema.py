"""The canonical job table, declared once.

One row per job: array tasks and heterogeneous-job components are jobs of their own, job steps
are not. Every other view of the table derives from :data:`JOB_COLUMNS`: the Polars schema used
by ingest, the JSON Schema in ``schemas/job_table.schema.json`` (a test keeps them equal), the
test-data factories and the column reference in the README.

Each column belongs to one of three kinds, and the name shows which:

* ``identity``: which job this is (ids, name). Not a feature for policies.
* ``submit``: what the scheduler knew when the job was submitted (who, where, and the ``req_*``
  requests). Policies and learned features may read only these.
* ``outcome``: what really happened (``start_time``, ``end_time``, ``run_time_s``,
  ``wait_time_s``, ``alloc_*``, ``state``, ...). Used by the simulator and the reports only.

Unknown values are null, never -1. Times are UTC timestamps at second resolution; durations are
whole seconds (``*_s``); memory is MiB (``*_mib``) per job, summed over its nodes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import polars as pl

__all__ = [
    "JOB_COLUMNS",
    "JOB_STATES",
    "LAST_EPOCH_S",
    "METADATA_PREFIX",
    "SCHEMA_VERSION",
    "STATE_DTYPE",
    "TIMESTAMP_DTYPE",
    "Column",
    "job_table_json_schema",
    "polars_schema",
    "submit_columns",
]

SCHEMA_VERSION = "1.1"
"""Version of the job-table contract; bump the major part on incompatible changes, the minor
part on compatible ones (1.1 added the nullable ``req_gpu_milli``)."""

METADATA_PREFIX = "hpcpolicy."
"""Prefix of the Parquet key-value metadata keys hpcpolicy writes."""

JOB_STATES: tuple[str, ...] = (
    "completed",
    "failed",
    "cancelled",
    "timeout",
    "node_fail",
    "oom",
    "preempted",
    "pending",
    "running",
    "unknown",
)
"""Final job states. ``pending``/``running`` are jobs the log caught before they ended."""

STATE_DTYPE = pl.Enum(JOB_STATES)
TIMESTAMP_DTYPE = pl.Datetime("ms", time_zone="UTC")
LAST_EPOCH_S = 253402300799
"""9999-12-31T23:59:59Z in Unix seconds: the latest time a job table holds (Python's
``datetime``, through which reports and JSON pass, ends there); later is ``absurd_value``."""

Kind = Literal["identity", "submit", "outcome"]


@dataclass(frozen=True)
class Column:
    """One column of the job table."""

    name: str
    """Column name; ``req_*`` are requests known at submit, ``alloc_*`` what was granted."""
    dtype: pl.DataType
    """Polars dtype stored in Parquet."""
    kind: Kind
    """identity, submit (known to the scheduler at submit time) or outcome (what happened)."""
    description: str
    """One sentence for the docs and the JSON Schema."""
    nullable: bool = True
    """Whether null (unknown) is allowed."""
    unit: str | None = None
    """Unit of the values: s, MiB, cpus, nodes, gpus, milli-GPUs, or None."""
    minimum: int | None = None
    """Smallest valid value for integer columns."""
    since: int = 0
    """Minor schema version that added the column; a table of an older 1.x version reads as
    if the (nullable) column were all null."""


_I64, _I32, _STR = pl.Int64(), pl.Int32(), pl.String()

JOB_COLUMNS: tuple[Column, ...] = (
    # identity
    Column("job_id", _STR, "identity", "Job id as the source prints it (123, 123_4, 123+1).",
           nullable=False),
    Column("job_id_raw", _I64, "identity", "Numeric id (Slurm JobIDRaw, SWF job number).",
           minimum=0),
    Column("array_job_id", _I64, "identity", "Parent id of an array task (123 in 123_4).",
           minimum=0),
    Column("array_task_id", _I64, "identity", "Index of an array task (4 in 123_4).", minimum=0),
    Column("het_job_id", _I64, "identity", "Leader id of a heterogeneous job (123 in 123+1).",
           minimum=0),
    Column("het_job_offset", _I32, "identity", "Component of a heterogeneous job (1 in 123+1).",
           minimum=0),
    Column("job_name", _STR, "identity", "Job name from the log; untrusted text."),
    # known at submit time
    Column("user", _STR, "submit", "User name or id."),
    Column("group", _STR, "submit", "Unix group name or id."),
    Column("account", _STR, "submit", "Accounting (bank) account."),
    Column("partition", _STR, "submit", "Partition (queue) the job was submitted to."),
    Column("qos", _STR, "submit", "Quality of service."),
    Column("submit_time", TIMESTAMP_DTYPE, "submit", "When the job was submitted (UTC).",
           nullable=False),
    Column("eligible_time", TIMESTAMP_DTYPE, "submit",
           "When the job became eligible to start (UTC)."),
    Column("req_cpus", _I32, "submit", "Requested CPUs (cores/processors), whole job.",
           unit="cpus", minimum=1),
    Column("req_nodes", _I32, "submit", "Requested nodes.", unit="nodes", minimum=1),
    Column("req_gpus", _I32, "submit", "Requested GPUs, whole job.", unit="gpus", minimum=0),
    Column("req_gpu_type", _STR, "submit", "Requested GPU type (a100 in gres/gpu:a100=2)."),
    Column("req_gpu_milli", _I32, "submit",
           "Share of each requested GPU in thousandths (1000 = a whole GPU, 500 = half of "
           "one); null = whole GPUs or unknown.", unit="milli-GPUs", minimum=1, since=1),
    Column("req_mem_mib", _I64, "submit", "Requested memory, whole job.", unit="MiB",
           minimum=0),
    Column("req_walltime_s", _I64, "submit", "Requested time limit.", unit="s", minimum=1),
    # what happened
    Column("start_time", TIMESTAMP_DTYPE, "outcome", "When the job started (UTC)."),
    Column("end_time", TIMESTAMP_DTYPE, "outcome", "When the job ended (UTC)."),
    Column("run_time_s", _I64, "outcome", "Run time, end minus start.", unit="s", minimum=0),
    Column("wait_time_s", _I64, "outcome", "Wait time, start minus submit.", unit="s",
           minimum=0),
    Column("alloc_cpus", _I32, "outcome", "Allocated CPUs, whole job.", unit="cpus", minimum=0),
    Column("alloc_nodes", _I32, "outcome", "Allocated nodes.", unit="nodes", minimum=0),
    Column("alloc_gpus", _I32, "outcome", "Allocated GPUs, whole job.", unit="gpus", minimum=0),
    Column("state", STATE_DTYPE, "outcome", "Final state.", nullable=False),
    Column("exit_code", _I32, "outcome", "Exit code of the job script (1 in 1:0)."),
    Column("node_list", _STR, "outcome", "Nodes the job ran on, Slurm hostlist form."),
)


def polars_schema() -> pl.Schema:
    """The job table's Polars schema, in column order."""
    return pl.Schema({c.name: c.dtype for c in JOB_COLUMNS})


def submit_columns() -> tuple[str, ...]:
    """Names of the columns a scheduling policy may read (known at submit time)."""
    return tuple(c.name for c in JOB_COLUMNS if c.kind == "submit")


def _json_type(col: Column) -> dict[str, Any]:
    """JSON Schema fragment for one column's values."""
    if col.dtype == STATE_DTYPE:
        base: dict[str, Any] = {"type": "string", "enum": list(JOB_STATES)}
    elif col.dtype == TIMESTAMP_DTYPE:
        base = {"type": "string", "format": "date-time"}
    elif col.dtype.is_integer():
        base = {"type": "integer"}
        if col.minimum is not None:
            base["minimum"] = col.minimum
    else:
        base = {"type": "string"}
    if col.nullable:
        base["type"] = [base["type"], "null"]
        if "enum" in base:
            base["enum"] = [*base["enum"], None]
    return base


def job_table_json_schema() -> dict[str, Any]:
    """JSON Schema (draft 2020-12) of one job-table row, derived from :data:`JOB_COLUMNS`.

    ``x-polars-dtype``, ``x-kind`` and ``x-unit`` carry what JSON Schema cannot say.
    """
    properties: dict[str, Any] = {}
    for col in JOB_COLUMNS:
        prop = {"description": col.description, **_json_type(col)}
        prop["x-polars-dtype"] = str(col.dtype)
        prop["x-kind"] = col.kind
        if col.unit:
            prop["x-unit"] = col.unit
        properties[col.name] = prop
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "urn:hpcpolicy:schema:job_table",
        "title": "hpcpolicy canonical job table (one row)",
        "description": "One job per row; steps folded into their job. Unknown is null.",
        "x-schema-version": SCHEMA_VERSION,
        "type": "object",
        "properties": properties,
        "required": [c.name for c in JOB_COLUMNS],
        "additionalProperties": False,
    }
