"""Read Standard Workload Format logs (SWF v2.2, plain or gzipped) into the job table.

The format (https://www.cs.huji.ac.il/labs/parallel/workload/swf.html) is one job per line,
18 whitespace-separated numbers, ``-1`` for unknown; comment lines start with ``;`` and the
header comments at the top state facts about the log (:mod:`hpcpolicy.ingest.swf.header`).
Lines are scanned by :mod:`hpcpolicy.ingest.swf.scan`; the mapping below is Polars
expressions. Unknown (-1) becomes null; nothing is invented for what SWF does not record.

Field mapping (SWF field number: name -> job-table column):

==  ========================  ===============================================================
 1  job number                ``job_id`` (as text) and ``job_id_raw``
 2  submit time (s)           ``submit_time`` = time origin + submit
 3  wait time (s)             ``wait_time_s``; ``start_time`` = submit + wait
 4  run time (s)              ``run_time_s``; ``end_time`` = start + run
 5  allocated processors      ``alloc_cpus``
 6  average CPU time          (no column; checked only)
 7  used memory (KB/proc)     (no column; checked only)
 8  requested processors      ``req_cpus``
 9  requested time (s)        ``req_walltime_s``
10  requested memory (KB/proc) ``req_mem_mib`` = KB x requested processors / 1024, rounded up
11  status                    ``state``: 1 completed, 0 failed, 5 cancelled, -1 unknown;
                              2, 3, 4 (a partial execution of a checkpointed or swapped job,
                              whose whole job is the line with status 0, 1 or 5) are folded
                              into that job, counted as ``step_folded``, not kept as jobs
12  user id                   ``user`` (the number as text, exact to 18 digits)
13  group id                  ``group`` (the number as text, exact to 18 digits)
14  executable number         (no column)
15  queue number              ``qos``: SWF queues are classes of service on the same
                              machine (batch/interactive by SWF convention, LoadLeveler
                              classes, ...), which is what a Slurm QOS is; named by the
                              header's ``; Queue: N name`` lines where it has them
16  partition number          ``partition``: SWF partitions are sets of nodes (or machines of
                              a cluster), which is what a Slurm partition is; named by the
                              header's ``; Partition: N name`` lines where it has them
17  preceding job number      (no column)
18  think time (s)            (no column)
==  ========================  ===============================================================

Ids (fields 12 to 16) are identifiers, not amounts: any whole number of up to 18 digits,
read exactly (hashed ids of 14 digits and more stay distinct), none larger.

Columns after field 18, which some simulators append (node specification, queue name,
properties), make an *extended* file when most of its first data lines have the same number
of them (the rule is in :mod:`hpcpolicy.ingest.swf.columns`): the 18 standard fields are read,
the extra columns counted (``inferred["extra_columns"]`` and a note) and ignored.

Other columns (array and heterogeneous ids, name, account, eligible time, nodes, GPUs, exit
code, node list) are null: SWF does not record them.

A header ``MaxRecords`` that differs from the records (data lines) in the file is reported in
the notes (KTH-SP2-1996-2.1-cln says 28,476 and holds 27,992).

Time origin: the header's ``UnixStartTime`` (a time from 1970 to 9999, else the file is
refused); without it, 1970-01-01 UTC, reported in
``inferred`` and the notes (times then keep their order and spacing but not their dates).
Times are absolute (UTC), so ``--tz`` does not apply to SWF.

Machine size, for the simulator: the header's ``MaxProcs`` is a fact of the log (``header``).
Otherwise ``inferred["MaxProcs"]`` holds the size to use and how it was found, first that
applies: ``--procs``; the header's ``MaxNodes`` (before SWF 2.1 added MaxProcs, a node was a
processor, as in the Lublin model traces); the largest processor count any kept job requested
or was given (a lower bound on the machine, found by one extra pass over the file).
Without MaxProcs or MaxNodes a note says that the machine size is unknown and how to give it
(``--procs N`` here, ``--procs N`` or ``--cluster FILE`` at simulate time).
``--procs`` also overrides a header ``MaxProcs`` (with a note).

Cleaning rules (each counted under its code; see :mod:`hpcpolicy.ingest.reasons`):

* rejected lines, first rule that applies: ``non_utf8``, ``field_count``, ``bad_number``,
  ``no_job_id``, ``no_submit_time``, ``swf_bad_status``, ``swf_fractional_id``,
  ``swf_long_id``, ``absurd_value`` (details and limits in :mod:`hpcpolicy.ingest.swf.scan`);
* repairs of kept jobs: ``swf_fraction_rounded`` (a fractional time or processor count is
  rounded to the nearest whole number, ties to even), ``swf_zero_request`` (0 requested
  processors or 0 requested time is read as unknown), ``swf_mem_by_alloc`` (memory per
  processor is multiplied by the allocated processors where the requested count is unknown).
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl

from hpcpolicy.errors import InputFormatError
from hpcpolicy.ingest.config import IngestConfig
from hpcpolicy.ingest.plan import REPAIR_PREFIX, STEP_FOLDED, PassCheck, ReaderPlan
from hpcpolicy.ingest.swf.columns import extra_columns
from hpcpolicy.ingest.swf.header import numbered_names, read_head
from hpcpolicy.ingest.swf.scan import scan_swf
from hpcpolicy.schema import JOB_COLUMNS, LAST_EPOCH_S, STATE_DTYPE

__all__ = ["STATUS_STATES", "plan_swf"]

STATUS_STATES: dict[int, str] = {1: "completed", 0: "failed", 5: "cancelled", -1: "unknown"}
"""SWF status -> job state; statuses 2, 3 and 4 mark partial executions (folded)."""
_PARTIAL = (2.0, 3.0, 4.0)
_ROUNDED = ("f2", "f3", "f4", "f5", "f8", "f9")
_GIVE_SIZE = ("give it with --procs N here, or with --procs N or --cluster FILE at simulate "
              "time")


def _known(field: str) -> pl.Expr:
    """The field's value, null where the log says -1 (unknown)."""
    return pl.when(pl.col(field) != -1.0).then(pl.col(field))


def _whole(field: str) -> pl.Expr:
    """The field rounded to a whole number (Int64), null where unknown."""
    return _known(field).round().cast(pl.Int64, strict=False)


def _request(field: str) -> pl.Expr:
    """A requested amount: null where unknown or 0 (a request of nothing is a placeholder)."""
    value = _whole(field)
    return pl.when(value != 0).then(value)


def _label(field: str) -> pl.Expr:
    """An id field (a whole number: the scan rejects others) as text, null where unknown."""
    return _known(field).cast(pl.Int64, strict=False).cast(pl.String)


def _state(status: pl.Expr) -> pl.Expr:
    """The job state of an SWF status (``replace_strict`` would hold the whole column)."""
    expr: Any = pl
    for code, state in STATUS_STATES.items():
        expr = expr.when(status == float(code)).then(pl.lit(state, dtype=STATE_DTYPE))
    return expr.otherwise(pl.lit("unknown", dtype=STATE_DTYPE))  # type: ignore[no-any-return]


def _utc_ms(seconds: pl.Expr) -> pl.Expr:
    return (seconds * 1000).cast(pl.Datetime("ms", "UTC"))


def _job_table(scan: pl.LazyFrame, origin: int, file: str,
               names: dict[str, dict[str, str]]) -> pl.LazyFrame:
    """Canonical columns, internal columns and repair flags from the scanned fields;
    ``names`` maps the partition and queue numbers to the header's names."""
    submit = pl.col("f2").round().cast(pl.Int64, strict=False) + origin
    start = submit + _whole("f3")
    end = start + _whole("f4")
    req_cpus = _request("f8")
    alloc = _whole("f5")
    mem_kb = _known("f10")
    mem_procs = pl.coalesce(req_cpus, alloc)
    status = pl.col("f11")
    mapped: dict[str, pl.Expr] = {
        "job_id": pl.col("f1").cast(pl.Int64, strict=False).cast(pl.String),
        "job_id_raw": pl.col("f1").cast(pl.Int64, strict=False),
        "user": _label("f12"),
        "group": _label("f13"),
        "partition": _label("f16").replace(names.get("Partition", {})),
        "qos": _label("f15").replace(names.get("Queue", {})),
        "submit_time": _utc_ms(submit),
        "req_cpus": req_cpus,
        "req_mem_mib": (mem_kb * mem_procs / 1024).ceil().cast(pl.Int64, strict=False),
        "req_walltime_s": _request("f9"),
        "start_time": _utc_ms(start),
        "end_time": _utc_ms(end),
        "run_time_s": _whole("f4"),
        "wait_time_s": _whole("f3"),
        "alloc_cpus": alloc,
        "state": _state(status),
    }
    # strict=False: rejected lines may hold values no column can (they are dropped anyway)
    columns = [mapped.get(c.name, pl.lit(None)).cast(c.dtype, strict=False).alias(c.name)
               for c in JOB_COLUMNS]
    fractional = pl.any_horizontal([pl.col(f) != pl.col(f).round() for f in _ROUNDED])
    return scan.select(
        *columns,
        pl.lit(file).alias("_file"),
        pl.col("_line"),
        pl.col("_raw"),
        pl.when(pl.col("_reason").is_null() & status.is_in(_PARTIAL))
        .then(pl.lit(STEP_FOLDED)).otherwise(pl.col("_reason")).alias("_reason"),
        fractional.alias(f"{REPAIR_PREFIX}swf_fraction_rounded"),
        ((pl.col("f8") == 0) | (pl.col("f9") == 0)).alias(f"{REPAIR_PREFIX}swf_zero_request"),
        (mem_kb.is_not_null() & req_cpus.is_null() & alloc.is_not_null())
        .alias(f"{REPAIR_PREFIX}swf_mem_by_alloc"),
    )


def _largest_job(path: Path, cfg: IngestConfig, extended: bool) -> int | None:
    """The largest processor count a kept job of ``path`` requested or was given."""
    row = (scan_swf(path, cfg.limits, extended).filter(pl.col("_reason").is_null())
           .select(pl.max_horizontal(pl.col("f5").max(), pl.col("f8").max()).alias("n"))
           .collect())
    value = row["n"][0]
    return int(value) if value is not None and value >= 1 else None


def _machine_size(path: Path, header: dict[str, Any], cfg: IngestConfig, extended: bool,
                  notes: list[str]) -> dict[str, Any] | None:
    """``inferred["MaxProcs"]`` (value and how), or None when the header's MaxProcs holds."""
    stated = header.get("MaxProcs")
    if cfg.procs is not None:
        if isinstance(stated, int) and stated != cfg.procs:
            notes.append(f"{path.name}: --procs {cfg.procs} overrides the header's MaxProcs "
                         f"{stated}")
        elif isinstance(stated, int):
            return None
        return {"value": cfg.procs, "how": "given with --procs"}
    if isinstance(stated, int) and stated >= 1:
        return None
    nodes = header.get("MaxNodes")
    if isinstance(nodes, int) and nodes >= 1:
        notes.append(f"{path.name}: no MaxProcs in the header; machine size {nodes} processors "
                     "taken from MaxNodes (one processor per node)")
        return {"value": nodes, "how": "header MaxNodes, one processor per node (SWF before "
                "v2.1 had no MaxProcs)"}
    largest = _largest_job(path, cfg, extended)
    if largest is None:
        notes.append(f"{path.name}: no MaxProcs/MaxNodes in the header and no job states a "
                     f"processor count: the machine size is unknown; {_GIVE_SIZE}")
        return {"value": None, "how": "unknown: no MaxProcs/MaxNodes in the header and no job "
                "states a processor count; pass --procs"}
    notes.append(f"{path.name}: no MaxProcs/MaxNodes in the header: the machine size is "
                 f"unknown, taken as {largest} processors, the largest job in the log (a lower "
                 f"bound); {_GIVE_SIZE}")
    return {"value": largest, "how": "largest processor count requested or allocated by any "
            "kept job: a lower bound on the machine size"}


def plan_swf(path: Path, cfg: IngestConfig) -> ReaderPlan:
    """Plan reading one SWF file (plain or gzipped) into the canonical job table.

    Args:
        path: the SWF log.
        cfg: ingest options; ``procs`` sets the machine size when the header lacks MaxProcs.

    Returns:
        The lazy plan (one row per data line), the header facts, what was inferred, notes.

    Raises:
        InputFormatError: the header cannot be read (damaged or truncated file). A damaged
            stream further in is reported when the plan runs.

    Example:
        >>> from hpcpolicy.ingest import IngestConfig
        >>> plan = plan_swf(Path("lublin_256.swf"), IngestConfig())  # doctest: +SKIP
        >>> plan.header["MaxNodes"], plan.inferred["MaxProcs"]["value"]  # doctest: +SKIP
        (256, 256)
    """
    header, notes, sample = read_head(path, cfg.limits)
    notes = [f"{path.name}: {n}" for n in notes]
    inferred: dict[str, Any] = {}
    extra = extra_columns(sample)
    if extra:
        inferred["extra_columns"] = {
            "value": extra,
            "how": "columns after SWF field 18 on most of the first data lines: the 18 "
                   "standard fields are read, the others ignored",
        }
        notes.append(f"{path.name}: {extra} columns after SWF field 18 on most data lines (an "
                     "extended SWF); the 18 standard fields are read and the extra columns "
                     "ignored; a line with fewer than 18 fields is still a field_count reject")
    origin = header.get("UnixStartTime")
    if isinstance(origin, int) and not 0 <= origin <= LAST_EPOCH_S:
        raise InputFormatError(
            f"{path}: header UnixStartTime {origin} is not a Unix time from 1970 to 9999; "
            "correct the header line (seconds since 1970-01-01 UTC) or remove it")
    if not isinstance(origin, int):
        origin = 0
        inferred["time_origin"] = {
            "value": datetime.fromtimestamp(0, UTC).isoformat(),
            "how": "the header has no UnixStartTime; submit times are read as seconds since "
                   "1970-01-01 UTC",
        }
        notes.append(f"{path.name}: no UnixStartTime in the header; times count from "
                     "1970-01-01 UTC (order and spacing are right, dates are not)")
    size = _machine_size(path, header, cfg, extra > 0, notes)
    if size is not None:
        inferred["MaxProcs"] = size
    if cfg.tz != "UTC":
        notes.append(f"{path.name}: --tz {cfg.tz} does not apply to SWF, whose times are "
                     "offsets from UnixStartTime (an absolute instant)")
    names = {key: numbered_names(header, key) for key in ("Partition", "Queue")}
    for key, found in names.items():
        if found:
            notes.append(f"{path.name}: {key.lower()} names from the header: "
                         + ", ".join(f"{number} = {name}" for number, name in found.items()))
    frame = _job_table(scan_swf(path, cfg.limits, extra > 0), origin, str(path), names).cache()
    return ReaderPlan(frame=frame, source_format="swf", header=header, inferred=inferred,
                      notes=notes, after_pass=lambda rows: _record_count(path, header, rows))


def _record_count(path: Path, header: dict[str, Any], rows: int) -> PassCheck:
    """A note when the header's ``MaxRecords`` is not the number of records (data lines)."""
    stated = header.get("MaxRecords")
    if not isinstance(stated, int) or stated == rows:
        return PassCheck()
    return PassCheck(notes=(f"{path.name}: the header says MaxRecords {stated}, but the file "
                            f"holds {rows} records; the counts here are of those read",))
