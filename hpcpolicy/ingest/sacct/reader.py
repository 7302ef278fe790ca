"""Read a Slurm ``sacct`` export into the canonical job table (the ``sacct`` reader).

Accepted: ``sacct --parsable2`` (``|``, no trailing ``|``) and ``--parsable`` (trailing ``|``)
exports, with a header (or, header-less, with the column list given), columns in any order,
any subset holding ``Submit`` and ``State``; CSV exports (``,``, fields quoted as needed);
plain or gzipped. Every data line is one row; the rules, in the order they are applied:

* A step row (``123.batch``, ``123.extern``, ``123.0``, ``123+0.batch``, ``123_4.batch``: a
  ``.`` in the job-id field) is folded into its job (``step_folded``), or rejected
  (``orphan_step``) when its job has no row.
* A line with bytes that are not UTF-8 is rejected (``non_utf8``); one whose field count differs
  from the header's (a line break inside a job name; for CSV, broken quoting) is rejected
  (``field_count``) with its text, never parsed with shifted fields; one holding nearly every
  ASCII control character is binary data (``control_chars``). A ``|`` row with too many
  fields is read back, though, when the layout has one free-text column only (``JobName``,
  or ``Comment``, ``WorkDir``, ...; :data:`hpcpolicy.ingest.sacct.scan.FREE_TEXT`) and it
  comes after the job id: the extra ``|`` can only be the name's (repair
  ``sacct_name_rejoined``).
* Array tasks (``123_4``) and heterogeneous components (``123+1``) are jobs of their own; a
  pending array printed as one row (``123_[5-9%2]``) stays one row (repair ``sacct_array_grouped``).
* Several records of one job (``sacct --duplicates`` prints every requeued run; also exactly
  repeated rows): the last in the file is kept, earlier ones are ``duplicate_superseded``.
  Superseded records and orphan steps are only known once the whole file is read: when a file
  has any, it is read a second time (with a note), otherwise once.
* Times are zone-less local times in ``--tz``, stored in UTC; ``Unknown``/``None``/empty are
  null; a timestamp is ``YYYY-MM-DDTHH:MM:SS`` (or with a space for the ``T``, as detected from
  the first rows; one-digit month, day, hour, minute or second accepted), a real date and time
  of day (``23:59:60`` is not). Requested memory is the whole job's MiB: ``ReqTRES``
  ``mem=``, else ``ReqMem`` (old ``4000Mc`` per CPU / ``64Gn`` per node, or new total
  ``4000M``); ``0n`` (all of each node's memory, a size the log does not give) is null (repair
  ``sacct_mem_whole_node``). GPUs come from ``gres/gpu=N`` or ``gres/gpu:TYPE=N`` in
  ``ReqTRES``/``AllocTRES``.
* ``UNLIMITED``, ``Partition_Limit`` and ``INVALID`` time limits leave ``req_walltime_s`` null
  (repair ``sacct_walltime_unset``); ``CANCELLED by 1234`` is cancelled; unknown states are
  ``unknown`` (repair ``sacct_state_unrecognised``).
* Allocated CPUs/nodes/GPUs and the exit code are null for jobs that never started.
* Exports without ``Start``/``End`` (e.g. ``kabre-2024-sacct.csv``) give run time from
  ``Elapsed``, else from ``CPUTimeRAW`` divided by the CPUs, and wait from ``ResvCPURAW``
  divided by the requested CPUs: estimates, flagged by repairs and explained in the notes.
  Without ``JobID``/``JobIDRaw`` the job id is ``line:N`` (the line number).

How: a compiled scan (:mod:`hpcpolicy.ingest.sacct.scan`, :mod:`hpcpolicy.ingest.sacct.kernel`)
sorts the lines out, folds the steps and parses whole numbers, timestamps and TRES lists
(:mod:`hpcpolicy.ingest.sacct.parse`); Polars expressions
(:mod:`hpcpolicy.ingest.sacct.columns`) build the job table from them and apply the checks.

Example:
    A finished job, one still pending, and the batch step of the first, folded into it:

    >>> import pathlib, tempfile
    >>> from hpcpolicy.ingest import IngestConfig
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "sacct.txt"
    >>> _ = p.write_text("JobID|User|Submit|Start|End|State|NCPUS\\n"
    ...     "7|ann|2024-03-01T10:00:00|2024-03-01T10:05:00|2024-03-01T11:05:00|COMPLETED|4\\n"
    ...     "7.batch||2024-03-01T10:05:00|2024-03-01T10:05:00|2024-03-01T11:05:00|COMPLETED|4\\n"
    ...     "8|bob|2024-03-01T10:01:00|Unknown|Unknown|PENDING|2\\n")
    >>> plan = plan_sacct(p, IngestConfig())
    >>> rows = plan.frame.select("job_id", "state", "run_time_s", "_reason").collect().rows()
    >>> rows[:2]  # the jobs kept (no reason)
    [('7', 'completed', 3600, None), ('8', 'pending', None, None)]
    >>> rows[2][-1]  # the step's row, as the pipeline counts it
    'step_folded'
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from hpcpolicy.ingest import slurm_fields as sf
from hpcpolicy.ingest.config import IngestConfig
from hpcpolicy.ingest.plan import REPAIR_PREFIX, PassCheck, ReaderPlan
from hpcpolicy.ingest.sacct.columns import COUNT_MIN, Columns, build_columns
from hpcpolicy.ingest.sacct.fields import Fields
from hpcpolicy.ingest.sacct.layout import SacctLayout, read_layout
from hpcpolicy.ingest.sacct.scan import Known, PassLog, scan_sacct, settle

__all__ = ["CHECKS", "plan_sacct"]

CHECKS = (
    "non_utf8", "field_count", "no_job_id", "duplicate_superseded", "no_submit_time",
    "bad_timestamp", "bad_duration", "bad_number", "absurd_value", "end_before_start",
    "start_before_submit",
)
"""Reject checks in the order they are applied: the first one that fails names the reason
(the first two are applied by the scan, :mod:`hpcpolicy.ingest.sacct.scan`)."""


def _id_index(layout: SacctLayout) -> int | None:
    i = layout.index("JobID")
    return i if i is not None else layout.index("JobIDRaw")


def plan_sacct(path: Path, cfg: IngestConfig, known: Known | None = None) -> ReaderPlan:
    """Plan the ingest of one sacct export (see the module docstring for the rules).

    Args:
        path: the export, plain or gzipped.
        cfg: ingest options (``tz`` is the zone of the export's timestamps).
        known: for a second pass, the superseded records and orphan steps the first found.

    Returns:
        A plan whose frame has one row per data line (the steps folded into their jobs as
        one row per chunk of the file), and whose ``after_pass`` finds the superseded
        records and orphan steps of the whole file.

    Raises:
        InputFormatError: wrong separator, no header, a required column missing, timestamps
            in an unsupported form, or a file that cannot be read to its end.
    """
    layout = read_layout(path, cfg.sacct_columns, cfg.limits)
    fields = Fields(layout)
    id_index = _id_index(layout)
    jid = None if id_index is None else fields.get(layout.columns[id_index])
    cols = build_columns(fields, cfg, layout, jid)
    rows, log = scan_sacct(path, layout, fields, known, cfg.limits)
    frame = cols.apply(rows.with_columns(pl.lit(str(path)).alias("_file")))
    frame = frame.with_columns(_reason=_reason(cols, known))
    kept = pl.col("_reason").is_null()
    cols.repair("sacct_zero_request", (pl.col("req_cpus") == 0) | (pl.col("req_nodes") == 0))
    cols.repair("sacct_name_rejoined", pl.col("_rejoined"))
    frame = frame.with_columns(
        *[pl.when(pl.col(c).is_between(low, sf.MAX_COUNT)).then(pl.col(c)).alias(c)
          for c, low in COUNT_MIN.items()],
        **{f"{REPAIR_PREFIX}{code}": kept & flag for code, flag in cols.repairs.items()},
    )
    notes = list(dict.fromkeys(cols.notes))
    if cfg.tz == "UTC":
        notes.append("timestamps were read as UTC: sacct prints the local time of the machine "
                     "it ran on, so pass --tz (e.g. --tz Europe/Stockholm) unless that is UTC")
    return ReaderPlan(
        frame=frame,
        source_format="sacct",
        header={"columns": list(layout.columns), "style": layout.style,
                "header": layout.header_line is not None},
        inferred={**cols.inferred, "time_zone": cfg.tz,
                  "time_format": sf.TIME_FORMATS[layout.time_format]},
        notes=notes,
        after_pass=lambda _rows: _after_pass(path, cfg, log, known, id_index is not None),
    )


def _after_pass(path: Path, cfg: IngestConfig, log: PassLog, known: Known | None,
                has_ids: bool) -> PassCheck:
    """Whether the pass stands, or a second pass must apply superseded records and orphan
    steps (a second pass is final: the file has not changed)."""
    settled = settle(log, has_ids)
    if settled.copies:
        return PassCheck(notes=(
            f"{settled.copies} rows are exact copies of an earlier row; with no job id they "
            "cannot be told apart from identical jobs (e.g. array tasks), so all are kept",))
    found = settled.known
    if known is not None or not (len(found.superseded) or len(found.orphans)):
        return PassCheck()
    return PassCheck(rerun=plan_sacct(path, cfg, found), notes=(
        f"{path.name}: {len(found.superseded)} superseded records and {len(found.orphans)} "
        "orphan steps are only known once the whole file is read: it was read twice",))


def _any(exprs: list[pl.Expr]) -> pl.Expr:
    out = exprs[0]
    for e in exprs[1:]:
        out = out | e
    return out.fill_null(False)


def _reason(cols: Columns, known: Known | None) -> pl.Expr:
    """The ``_reason`` of each row: the scan's verdict, else the first failed check, else
    null (kept)."""
    checks = {name: list(exprs) for name, exprs in cols.checks.items()}
    if known is not None and len(known.superseded):
        checks.setdefault("duplicate_superseded", []).append(
            pl.col("_line").is_in(pl.Series("_line", known.superseded).implode()))
    counts = [pl.col(c) for c in COUNT_MIN]
    checks.setdefault("absurd_value", []).append(
        (pl.min_horizontal(counts) < 0) | (pl.max_horizontal(counts) > sf.MAX_COUNT))
    checks.setdefault("end_before_start", []).append(pl.col("end_time") < pl.col("start_time"))
    checks.setdefault("start_before_submit", []).append(
        pl.col("start_time") < pl.col("submit_time"))
    first = sf.first_of([(_any(checks[name]), name) for name in CHECKS if checks.get(name)])
    return pl.coalesce(pl.col("_scan_reason"), first)
