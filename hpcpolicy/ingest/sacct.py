"""Read a Slurm ``sacct`` export into the canonical job table (the ``sacct`` reader).

Accepted: ``sacct --parsable2`` (``|``, no trailing ``|``) and ``--parsable`` (trailing ``|``)
exports, with a header (or, header-less, with the column list given), columns in any order,
any subset holding ``Submit`` and ``State``; CSV exports (``,``, fields quoted as needed);
plain or gzipped. Every data line is one row; the rules, in the order they are applied:

* A line with bytes that are not UTF-8 is rejected (``non_utf8``); one whose field count differs
  from the header's (a ``|`` or a line break inside a job name) is rejected (``field_count``)
  with its text, never parsed with shifted fields.
* A step row (``123.batch``, ``123.extern``, ``123.0``, ``123+0.batch``, ``123_4.batch``) is
  folded into its job (``step_folded``), or rejected (``orphan_step``) when its job has no row.
* Array tasks (``123_4``) and heterogeneous components (``123+1``) are jobs of their own; a
  pending array printed as one row (``123_[5-9%2]``) stays one row (repair ``array_grouped``).
* Several records of one job (``sacct --duplicates`` prints every requeued run; also exactly
  repeated rows): the last in the file is kept, earlier ones are ``duplicate_superseded``.
* Times are zone-less local times in ``--tz``, stored in UTC; ``Unknown``/``None``/empty are
  null. Requested memory is the whole job's MiB: ``ReqTRES`` ``mem=``, else ``ReqMem`` (old
  ``4000Mc`` per CPU / ``64Gn`` per node, or new total ``4000M``); ``0n`` (all of each node's
  memory, a size the log does not give) is null (repair ``mem_whole_node``). GPUs come from
  ``gres/gpu=N`` or ``gres/gpu:TYPE=N`` in ``ReqTRES``/``AllocTRES``.
* ``UNLIMITED``, ``Partition_Limit`` and ``INVALID`` time limits leave ``req_walltime_s`` null
  (repair ``walltime_unset``); ``CANCELLED by 1234`` is cancelled; unknown states are
  ``unknown`` (repair ``state_unrecognised``).
* Allocated CPUs/nodes/GPUs are null for jobs that never started.
* Exports without ``Start``/``End`` (e.g. ``kabre-2024-sacct.csv``) give run time from
  ``Elapsed``, else from ``CPUTimeRAW`` divided by the CPUs, and wait from ``ResvCPURAW``
  divided by the requested CPUs: estimates, flagged by repairs and explained in the notes.
  Without ``JobID``/``JobIDRaw`` the job id is ``line:N`` (the line number).

Example:
    >>> from pathlib import Path
    >>> from hpcpolicy.ingest import IngestConfig
    >>> plan = plan_sacct(Path("sacct.txt"), IngestConfig())  # doctest: +SKIP
    >>> plan.frame.collect().height  # doctest: +SKIP
    3
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import polars as pl

from hpcpolicy.ingest import slurm_fields as sf
from hpcpolicy.ingest.config import IngestConfig
from hpcpolicy.ingest.plan import REPAIR_PREFIX, STEP_FOLDED, ReaderPlan
from hpcpolicy.ingest.sacct_layout import SacctLayout, read_layout
from hpcpolicy.ingest.sacct_scan import (
    Fields,
    SacctRecords,
    id_text,
    line_source,
    scan_records,
    split_fields,
)
from hpcpolicy.schema import TIMESTAMP_DTYPE

__all__ = ["plan_sacct"]

_TIME_MIN = datetime(1980, 1, 1)
_TIME_MAX = datetime(2100, 1, 1)

# Checks in the order they are applied: the first that fails names the reject reason.
_CHECKS = (
    "non_utf8", "field_count", "no_job_id", "duplicate_superseded", "no_submit_time",
    "bad_timestamp", "bad_duration", "bad_number", "absurd_value", "end_before_start",
    "start_before_submit",
)


class _Build:
    """Collects the parsed columns, reject checks and repair flags of one export, in stages:
    each stage's expressions may read the columns of the stages before it."""

    def __init__(self, fields: Fields, cfg: IngestConfig, layout: SacctLayout) -> None:
        self.fields, self.cfg, self.layout = fields, cfg, layout
        self.cols: dict[str, pl.Expr] = {}
        self.checks: dict[str, list[pl.Expr]] = {}
        self.repairs: dict[str, pl.Expr] = {}
        self.notes: list[str] = []
        self.inferred: dict[str, str] = {}
        self._stage = 0

    def check(self, reason: str, failed: pl.Expr) -> None:
        """Reject rows where ``failed`` is True with ``reason`` (one of :data:`_CHECKS`)."""
        self.checks.setdefault(reason, []).append(failed)

    def stage(self) -> dict[str, pl.Expr]:
        """The columns and check flags gathered since the last stage, as named expressions."""
        self._stage += 1
        out = dict(self.cols)
        out.update({f"_chk{self._stage}_{name}": _any(exprs)
                    for name, exprs in self.checks.items()})
        self.cols, self.checks = {}, {}
        return out

    def get(self, *names: str) -> pl.Expr | None:
        """Text of the first of ``names`` the export has."""
        for name in names:
            expr = self.fields.get(name)
            if expr is not None:
                return expr
        return None

    def integer(self, *names: str) -> pl.Expr | None:
        """The first of ``names`` the export has, as a whole number (bad ones rejected)."""
        text = self.get(*names)
        if text is None:
            return None
        parsed = sf.integer(text)
        self.check("bad_number", parsed.bad)
        return parsed.value

    def timestamp(self, name: str) -> pl.Expr | None:
        """Column ``name`` as a UTC timestamp (bad and absurd ones rejected)."""
        text = self.get(name)
        if text is None:
            return None
        fmt = sf.TIME_FORMATS[self.layout.time_format]
        parsed = sf.timestamp(text, fmt, self.cfg.tz)
        self.check("bad_timestamp", parsed.bad)
        self.check("absurd_value", (parsed.value < _utc(_TIME_MIN)) | (parsed.value >= _utc(_TIME_MAX)))
        if self.cfg.tz != "UTC":
            ambiguous = sf.is_ambiguous_local(text, fmt, self.cfg.tz)
            old = self.repairs.get("ambiguous_local_time")
            self.repairs["ambiguous_local_time"] = ambiguous if old is None else old | ambiguous
        return parsed.value


def _or_null(expr: pl.Expr | None, dtype: pl.DataType = pl.Int64()) -> pl.Expr:
    """``expr``, or a null literal of ``dtype`` when the export lacks the column."""
    return pl.lit(None, dtype) if expr is None else expr


def _utc(moment: datetime) -> pl.Expr:
    return pl.lit(moment).dt.replace_time_zone("UTC")


def _text_columns(b: _Build) -> None:
    for col, names in (
        ("job_name", ("JobName",)),
        ("user", ("User", "UID")),
        ("group", ("Group", "GID")),
        ("account", ("Account",)),
        ("partition", ("Partition",)),
        ("qos", ("QOS",)),
        ("node_list", ("NodeList",)),
    ):
        text = b.get(*names)
        b.cols[col] = sf.text(text) if text is not None else pl.lit(None, pl.String)


def _job_ids(b: _Build, jid: pl.Expr | None) -> None:
    """job_id and its parts; without an id column, ``line:N``."""
    raw_id = b.integer("JobIDRaw")
    if jid is None:
        b.cols["job_id"] = pl.format("line:{}", pl.col("_line"))
        for col in ("array_job_id", "array_task_id", "het_job_id", "het_job_offset"):
            b.cols[col] = pl.lit(None, pl.Int64)
        b.cols["job_id_raw"] = raw_id if raw_id is not None else pl.lit(None, pl.Int64)
        b.notes.append(
            "the export has no JobID or JobIDRaw column: job ids are line numbers ('line:N'), "
            "requeued or repeated records cannot be recognised, and exact copies of a row "
            "are kept as separate jobs"
        )
        b.inferred["job_id"] = "synthesised from line numbers ('line:N')"
        return
    plain = jid.cast(pl.Int64, strict=False)
    parts = sf.job_id_parts(pl.when(plain.is_null()).then(jid))
    b.check("no_job_id", parts.bad & plain.is_null())
    b.check("no_job_id", jid.fill_null("") == "")
    base = plain.fill_null(parts.base)
    in_array = parts.array_task.is_not_null() | parts.array_group
    b.cols["job_id"] = jid
    b.cols["array_job_id"] = pl.when(in_array).then(base)
    b.cols["array_task_id"] = parts.array_task
    b.cols["het_job_id"] = pl.when(parts.het_offset.is_not_null()).then(base)
    b.cols["het_job_offset"] = parts.het_offset
    own = plain.is_not_null() | parts.array_group | (parts.het_offset == 0)
    b.cols["job_id_raw"] = raw_id if raw_id is not None else pl.when(own).then(base)
    b.repairs["array_grouped"] = parts.array_group.fill_null(False)


def _times(b: _Build) -> None:
    for col, name in (("submit_time", "Submit"), ("eligible_time", "Eligible"),
                      ("start_time", "Start"), ("end_time", "End")):
        value = b.timestamp(name)
        b.cols[col] = value if value is not None else pl.lit(None, TIMESTAMP_DTYPE)
    b.check("no_submit_time", b.cols["submit_time"].is_null())


def _duration(b: _Build, raw_name: str, text_name: str, raw_scale: int) -> pl.Expr | None:
    """Seconds from ``raw_name`` (whole units of ``raw_scale`` s) or the text ``text_name``."""
    raw = b.get(raw_name)
    text = raw if raw is not None else b.get(text_name)
    if text is None:
        return None
    if raw is not None:
        value = sf.integer(raw)
        bad = value.bad & ~sf.is_unset_duration(raw)
        seconds = value.value * raw_scale
    else:
        parsed = sf.duration_s(text)
        bad, seconds = parsed.bad, parsed.value
    b.check("bad_duration", bad)
    b.check("absurd_value", seconds > sf.MAX_DURATION_S)
    if text_name == "Timelimit":
        b.repairs["walltime_unset"] = sf.is_unset_duration(text) | (seconds == 0).fill_null(False)
    return pl.when(seconds.is_between(0, sf.MAX_DURATION_S)).then(seconds)


def _count(b: _Build, names: tuple[str, ...], tres: pl.Expr | None, key: str) -> pl.Expr:
    """A count from the first of ``names`` the export has, else from the TRES list."""
    value = b.integer(*names)
    if value is None and tres is not None:
        parsed = sf.tres_count(tres, key)
        b.check("bad_number", parsed.bad)
        value = parsed.value
    return _or_null(value)


def _gpus(b: _Build, tres: pl.Expr | None) -> pl.Expr:
    if tres is None:
        return pl.lit(None, pl.Int64)
    parsed = sf.tres_gpus(tres)
    b.check("bad_number", parsed.bad)
    return parsed.value


def _requests(b: _Build) -> None:
    tres = b.get("ReqTRES")
    b.cols["req_cpus"] = _count(b, ("ReqCPUS",), tres, "cpu")
    b.cols["req_nodes"] = _count(b, ("ReqNodes",), tres, "node")
    b.cols["req_gpus"] = _gpus(b, tres)
    b.cols["req_gpu_type"] = _or_null(None if tres is None else sf.tres_gpu_type(tres), pl.String)
    mem = pl.lit(None, pl.Int64)
    if tres is not None:
        tres_mem = sf.tres_mem_mib(tres)
        b.check("bad_number", tres_mem.bad)
        mem = tres_mem.value
    req_mem = b.get("ReqMem")
    if req_mem is not None:
        nodes = b.cols["req_nodes"].fill_null(_or_null(b.integer("NNodes", "AllocNodes")))
        parsed = sf.mem_mib(pl.when(mem.is_null()).then(req_mem), b.cols["req_cpus"], nodes)
        b.check("bad_number", parsed.bad)
        b.repairs["mem_whole_node"] = parsed.whole_node
        mem = mem.fill_null(parsed.value)
    b.cols["req_mem_mib"] = mem
    b.cols["req_walltime_s"] = _or_null(_duration(b, "TimelimitRaw", "Timelimit", 60))


def _outcome(b: _Build) -> None:
    tres = b.get("AllocTRES")
    started = pl.col("start_time").is_not_null() if b.layout.has("Start") else pl.lit(True)
    for col, value in (
        ("alloc_cpus", _count(b, ("AllocCPUS", "NCPUS"), tres, "cpu")),
        ("alloc_nodes", _count(b, ("AllocNodes", "NNodes"), tres, "node")),
        ("alloc_gpus", _gpus(b, tres)),
    ):
        b.cols[col] = pl.when(started).then(value)
    state, unrecognised = sf.state(_or_null(b.get("State"), pl.String))
    b.cols["state"] = state
    b.repairs["state_unrecognised"] = unrecognised
    exit_text = b.get("ExitCode")
    if exit_text is not None:
        code = sf.exit_code(exit_text)
        in_range = code.value.is_between(-(2**31), 2**31 - 1)
        b.check("bad_number", code.bad)
        b.check("absurd_value", ~in_range)
        b.cols["exit_code"] = pl.when(in_range).then(code.value)
    else:
        b.cols["exit_code"] = pl.lit(None, pl.Int64)


def _elapsed(b: _Build, start: pl.Expr, end: pl.Expr) -> None:
    """run_time_s and wait_time_s: exact from Start/End/Submit, else from what the export
    has (Elapsed exactly; CPUTimeRAW and ResvCPURAW as estimates)."""
    submit = pl.col("submit_time")
    lay = b.layout
    if lay.has("Start", "End"):
        run = (end - start).dt.total_seconds()
    else:
        run = _duration(b, "ElapsedRaw", "Elapsed", 1)
        if run is None and lay.has("CPUTimeRAW"):
            cputime = b.integer("CPUTimeRAW")
            exact = lay.has("AllocCPUS") or lay.has("NCPUS")
            cpus = pl.col("alloc_cpus") if exact else pl.col("req_cpus")
            run = pl.when(cpus > 0).then(cputime // cpus)  # type: ignore[operator]
            if not exact:
                b.repairs["run_time_estimated"] = run.is_not_null()
                b.notes.append(
                    "no Start/End/Elapsed columns: run_time_s is CPUTimeRAW / ReqCPUS, exact "
                    "only where the job was allocated the CPUs it requested (an estimate)"
                )
                b.inferred["run_time_s"] = "estimated as CPUTimeRAW // ReqCPUS"
    if lay.has("Start"):
        wait = (start - submit).dt.total_seconds()
    elif lay.has("ResvCPURAW"):
        resv = b.integer("ResvCPURAW")
        wait = pl.when(pl.col("req_cpus") > 0).then(resv // pl.col("req_cpus"))  # type: ignore[operator]
        b.repairs["wait_time_estimated"] = wait.is_not_null()
        b.notes.append(
            "no Start column: wait_time_s is ResvCPURAW / ReqCPUS, the reserved time counted "
            "from eligibility rather than submission (an estimate); start_time and end_time "
            "stay null"
        )
        b.inferred["wait_time_s"] = "estimated as ResvCPURAW // ReqCPUS"
    else:
        wait = None
    b.cols["run_time_s"] = run if run is not None else pl.lit(None, pl.Int64)
    b.cols["wait_time_s"] = wait if wait is not None else pl.lit(None, pl.Int64)
    if not lay.has("Start", "End"):
        b.notes.append("no Start/End columns: start_time and end_time cannot be derived")


def plan_sacct(path: Path, cfg: IngestConfig) -> ReaderPlan:
    """Plan the ingest of one sacct export (see the module docstring for the rules).

    Args:
        path: the export, plain or gzipped.
        cfg: ingest options (``tz`` is the zone of the export's timestamps).

    Returns:
        A plan whose frame has one row per data line.

    Raises:
        InputFormatError: wrong separator, no header, a required column missing, timestamps
            in an unsupported form, or a file that cannot be read to its end.
    """
    layout = read_layout(path, getattr(cfg, "sacct_columns", None))
    records = scan_records(path, layout)
    rows = line_source(path, layout, records.lossy)
    id_index = layout.index("JobID")
    if id_index is None:
        id_index = layout.index("JobIDRaw")
    raw = pl.col("_raw")
    if id_index is not None:
        rows = rows.with_columns(_jid=id_text(raw, layout, id_index))
        step = pl.col("_jid").str.contains(".", literal=True).fill_null(False)
    else:
        step = pl.lit(False)
    rows = rows.with_columns(_step=step)
    fields = split_fields(rows, pl.when(~pl.col("_step")).then(raw), layout)
    b = _Build(fields, cfg, layout)
    frame = fields.frame.with_columns(_ok=fields.valid)
    _job_ids(b, pl.col("_jid") if id_index is not None else None)
    _text_columns(b)
    _times(b)
    _requests(b)
    frame = frame.with_columns(**b.stage())
    _outcome(b)
    frame = frame.with_columns(**b.stage())
    _elapsed(b, pl.col("start_time"), pl.col("end_time"))
    frame = frame.with_columns(**b.stage())
    frame = frame.with_columns(_reason=_reason(frame, records))
    kept = pl.col("_reason").is_null()
    repairs = {f"{REPAIR_PREFIX}{code}": kept & flag.fill_null(False)
               for code, flag in b.repairs.items()}
    frame = frame.with_columns(
        *[pl.when(pl.col(c).is_between(_COUNT_MIN[c], sf.MAX_COUNT)).then(pl.col(c)).alias(c)
          for c in _COUNT_MIN],
        pl.when(pl.col("req_mem_mib") <= sf.MAX_MEM_MIB).then(pl.col("req_mem_mib")),
        pl.lit(str(path)).alias("_file"),
        **repairs,
    )
    notes = list(dict.fromkeys(b.notes))
    if records.copies:
        notes.append(
            f"{records.copies} rows are exact copies of an earlier row; with no job id they "
            "cannot be told apart from identical jobs (e.g. array tasks), so all are kept"
        )
    return ReaderPlan(
        frame=frame,
        source_format="sacct",
        header={"columns": list(layout.columns), "style": layout.style,
                "header": layout.header_line is not None},
        inferred={**b.inferred, "time_zone": cfg.tz,
                  "time_format": sf.TIME_FORMATS[layout.time_format]},
        notes=notes,
    )


_COUNT_MIN = {"req_cpus": 1, "req_nodes": 1, "req_gpus": 0, "alloc_cpus": 0, "alloc_nodes": 0,
              "alloc_gpus": 0}
"""Smallest valid value of each count column (the job table's minimum)."""


def _any(exprs: list[pl.Expr]) -> pl.Expr:
    out = exprs[0].fill_null(False)
    for e in exprs[1:]:
        out = out | e.fill_null(False)
    return out


def _reason(frame: pl.LazyFrame, records: SacctRecords) -> pl.Expr:
    """The ``_reason`` of each row: a step code, the first failed check, or null (kept)."""
    names = frame.collect_schema().names()
    step = pl.col("_step")
    chain = pl.when(step & pl.col("_line").is_in(records.orphan_lines.implode())).then(
        pl.lit("orphan_step")
    ).when(step).then(pl.lit(STEP_FOLDED))
    counts_out = [~pl.col(c).is_between(0, sf.MAX_COUNT) for c in _COUNT_MIN]
    direct = {
        "non_utf8": [pl.col("_bad_bytes")],
        "field_count": [~pl.col("_ok")],
        "duplicate_superseded": [pl.col("_line").is_in(records.superseded_lines.implode())],
        "absurd_value": [*counts_out, pl.col("req_mem_mib") > sf.MAX_MEM_MIB],
        "end_before_start": [pl.col("end_time") < pl.col("start_time")],
        "start_before_submit": [pl.col("start_time") < pl.col("submit_time")],
    }
    for name in _CHECKS:
        parts = direct.get(name, []) + [pl.col(c) for c in names
                                        if c.startswith("_chk") and c.endswith(f"_{name}")]
        if parts:
            chain = chain.when(_any(parts)).then(pl.lit(name))
    return chain.otherwise(pl.lit(None, pl.String))
