"""The job-table columns of a sacct export, built from its fields in three stages.

1. *leaves*: every expensive parse of a field (cast, regex; numbers, timestamps and TRES
   entries come parsed by the scan, see :class:`hpcpolicy.ingest.sacct.fields.Fields`),
   stored once as a ``_p_*`` column;
2. *values*: the job-table columns that combine leaves with cheap expressions;
3. *derived*: columns that need stage-2 columns (allocations of jobs that started, total
   memory from per-CPU requests, run and wait times).

Storing the leaves keeps Polars from evaluating a parse once per use, which nested
``when/then`` expressions otherwise do. The reject checks and repair flags gathered on the way
are evaluated after stage 3 (see :mod:`hpcpolicy.ingest.sacct.reader`).

Example:
    >>> cols = build_columns(fields, cfg, layout, job_id=pl.col("_jid"))  # doctest: +SKIP
    >>> frame = cols.apply(fields.with_fields())  # doctest: +SKIP
"""

from __future__ import annotations

from datetime import datetime

import polars as pl

from hpcpolicy.ingest import slurm_fields as sf
from hpcpolicy.ingest.config import IngestConfig
from hpcpolicy.ingest.sacct.fields import Fields
from hpcpolicy.ingest.sacct.layout import SacctLayout
from hpcpolicy.ingest.sacct.parse import EMPTY
from hpcpolicy.schema import TIMESTAMP_DTYPE

__all__ = ["COUNT_MIN", "Columns", "build_columns"]

COUNT_MIN = {"req_cpus": 1, "req_nodes": 1, "req_gpus": 0, "alloc_cpus": 0, "alloc_nodes": 0,
             "alloc_gpus": 0}
"""Smallest valid value of each count column (the job table's minimum); 0 CPUs or nodes
requested is Slurm's "not set" and is stored as null."""
_TIME_RANGE = (datetime(1980, 1, 1), datetime(2100, 1, 1))
_INT32 = (-(2**31), 2**31 - 1)
_I64 = pl.Int64()


def _null(dtype: pl.DataType = _I64) -> pl.Expr:
    return pl.lit(None, dtype)


def _or_null(expr: pl.Expr | None) -> pl.Expr:
    return _null() if expr is None else expr


def _utc(moment: datetime) -> pl.Expr:
    return pl.lit(moment).dt.replace_time_zone("UTC")


class Columns:
    """The three stages of expressions, plus the checks, repairs and notes found on the way."""

    def __init__(self, fields: Fields, cfg: IngestConfig, layout: SacctLayout) -> None:
        self.fields, self.cfg, self.layout = fields, cfg, layout
        self.leaves: dict[str, pl.Expr] = {}
        self.values: dict[str, pl.Expr] = {}
        self.derived: dict[str, pl.Expr] = {}
        self.checks: dict[str, list[pl.Expr]] = {}
        """Reject reason -> conditions (any True rejects the row), read after stage 3."""
        self.repairs: dict[str, pl.Expr] = {}
        self.notes: list[str] = []
        self.inferred: dict[str, str] = {}

    def apply(self, frame: pl.LazyFrame) -> pl.LazyFrame:
        """``frame`` with the three stages of columns added."""
        return (frame.with_columns(**self.leaves).with_columns(**self.values)
                .with_columns(**self.derived))

    def check(self, reason: str, failed: pl.Expr) -> None:
        """Reject rows where ``failed`` is True with ``reason``."""
        self.checks.setdefault(reason, []).append(failed.fill_null(False))

    def repair(self, code: str, flag: pl.Expr) -> None:
        """Count rows where ``flag`` is True under repair ``code``."""
        old = self.repairs.get(code)
        flag = flag.fill_null(False)
        self.repairs[code] = flag if old is None else old | flag

    def text(self, *names: str) -> pl.Expr | None:
        """Raw text of the first of ``names`` the export has."""
        for name in names:
            expr = self.fields.get(name)
            if expr is not None:
                return expr
        return None

    def leaf(self, key: str, expr: pl.Expr) -> pl.Expr:
        """Store ``expr`` as stage-1 column ``_p_<key>`` and return a reference to it."""
        self.leaves.setdefault(f"_p_{key}", expr)
        return pl.col(f"_p_{key}")

    def integer(self, *names: str) -> pl.Expr | None:
        """The first of ``names`` the export has, as a whole number (bad text rejected)."""
        for name in names:
            parsed = self.fields.integer(name)
            if parsed is not None:
                value, bad = parsed
                self.check("bad_number", bad)
                return self.leaf(name, value)
        return None

    def timestamp(self, name: str) -> pl.Expr | None:
        """Column ``name`` as a UTC timestamp (bad and absurd ones rejected)."""
        parsed = self.fields.time(name)
        if parsed is None:
            return None
        naive, status = parsed
        tz = self.cfg.tz
        value = self.leaf(name, sf.to_utc(naive, tz))
        self.check("bad_timestamp", value.is_null() & (status != EMPTY))
        self.check("absurd_value", ~value.is_between(_utc(_TIME_RANGE[0]), _utc(_TIME_RANGE[1]),
                                                     closed="left"))
        if tz != "UTC":
            self.repair("sacct_ambiguous_local_time",
                        self.leaf(f"{name}_ambiguous", sf.is_ambiguous_local(naive, tz)))
        return value

    def missing(self, name: str) -> pl.Expr:
        """True where timestamp column ``name`` is empty, a "not known" word, or absent."""
        parsed = self.fields.time(name)
        return pl.lit(True) if parsed is None else parsed[1] == EMPTY

    def tres_count(self, tres: str, key: str, kind: str) -> pl.Expr:
        """The whole-number entry ``key`` (``cpu``, ``node``) of TRES column ``tres``, null
        when absent."""
        entry = self.fields.entry(tres, key)
        assert entry is not None, tres  # a column of the export
        text, present = entry
        value = self.leaf(f"{kind}_tres_{key}", sf.to_int(text))
        self.check("bad_number", value.is_null() & present)
        return value

    def gpus(self, tres: str | None, kind: str) -> tuple[pl.Expr, pl.Expr]:
        """(GPU count, GPU type) of TRES column ``tres``: 0 and null when it names no GPU."""
        gpu = None if tres is None else self.fields.gpu(tres)
        nonempty = None if tres is None else self.fields.nonempty(tres)
        if gpu is None or nonempty is None:
            return _null(), _null(pl.String())
        gpu_type, count_text, found = gpu
        count = self.leaf(f"{kind}_gpus", count_text.cast(pl.Int64, strict=False))
        self.check("bad_number", found & count.is_null())
        return pl.when(nonempty).then(count.fill_null(0)), gpu_type


def _job_ids(c: Columns, jid: pl.Expr | None) -> None:
    """job_id and its parts; without an id column, ``line:N``."""
    raw_id = c.integer("JobIDRaw")
    if jid is None:
        c.values["job_id"] = pl.format("line:{}", pl.col("_line"))
        for col in ("array_job_id", "array_task_id", "het_job_id", "het_job_offset"):
            c.values[col] = _null()
        c.values["job_id_raw"] = _or_null(raw_id)
        c.notes.append(
            "the export has no JobID or JobIDRaw column: job ids are line numbers ('line:N'), "
            "so requeued or repeated records cannot be recognised"
        )
        c.inferred["job_id"] = "synthesised from line numbers ('line:N')"
        return
    plain = c.leaf("plain_id", sf.to_int(jid))
    parts = c.leaf("id_parts", sf.job_id_parts(pl.when(sf.to_int(jid).is_null()).then(jid)))
    base = plain.fill_null(parts.struct.field("1").cast(pl.Int64, strict=False))
    task = parts.struct.field("2").cast(pl.Int64, strict=False)
    grouped = parts.struct.field("3").is_not_null()
    offset = parts.struct.field("4").cast(pl.Int64, strict=False)
    c.check("no_job_id", base.is_null())
    c.check("absurd_value", offset > sf.MAX_COUNT)
    c.values.update(
        job_id=jid,
        array_job_id=pl.when(task.is_not_null() | grouped).then(base),
        array_task_id=task,
        het_job_id=pl.when(offset.is_not_null()).then(base),
        het_job_offset=pl.when(offset <= sf.MAX_COUNT).then(offset),
        job_id_raw=raw_id if raw_id is not None else pl.when(
            plain.is_not_null() | grouped | (offset == 0)).then(base),
    )
    c.repair("sacct_array_grouped", grouped)


def _texts(c: Columns) -> None:
    for col, names in (
        ("job_name", ("JobName",)), ("user", ("User", "UID")), ("group", ("Group", "GID")),
        ("account", ("Account",)), ("partition", ("Partition",)), ("qos", ("QOS",)),
    ):
        t = c.text(*names)
        c.values[col] = sf.text(t) if t is not None else _null(pl.String())
    nodes = c.text("NodeList")
    c.values["node_list"] = (sf.text(nodes, sf.MISSING) if nodes is not None
                             else _null(pl.String()))


def _times(c: Columns) -> None:
    for col, name in (("submit_time", "Submit"), ("eligible_time", "Eligible"),
                      ("start_time", "Start"), ("end_time", "End")):
        value = c.timestamp(name)
        c.values[col] = value if value is not None else _null(TIMESTAMP_DTYPE)
    c.check("no_submit_time", c.missing("Submit"))


def _walltime(c: Columns) -> None:
    """req_walltime_s from TimelimitRaw (minutes) or Timelimit; unset words are null."""
    raw = c.text("TimelimitRaw")
    t = None if raw is not None else c.text("Timelimit")
    if raw is not None:
        seconds = c.leaf("TimelimitRaw", sf.to_int(raw)) * 60
        c.check("bad_duration", seconds.is_null() & sf.has_text(raw)
                & ~sf.is_unset_duration(raw))
        unset = sf.is_unset_duration(raw)
    elif t is not None:
        parts = c.leaf("Timelimit", sf.duration_parts(t))
        seconds = sf.duration_s(parts)
        c.check("bad_duration", sf.duration_bad(parts, t))
        unset = sf.is_unset_duration(t)
    else:
        c.values["req_walltime_s"] = _null()
        return
    c.check("absurd_value", seconds > sf.MAX_DURATION_S)
    c.repair("sacct_walltime_unset", unset | (seconds == 0))
    c.values["req_walltime_s"] = pl.when(seconds.is_between(1, sf.MAX_DURATION_S)).then(seconds)


def _memory(c: Columns, tres: str | None) -> None:
    """req_mem_mib (derived): ReqTRES mem= (a total), else ReqMem (per CPU, node or job)."""
    mem: pl.Expr = _null(pl.Float64())
    has_tres_mem: pl.Expr = pl.lit(False)
    entry = None if tres is None else c.fields.entry(tres, "mem")
    if entry is not None:
        text, has_tres_mem = entry
        mem = sf.size_mib(c.leaf("tres_mem", sf.size_parts(text)), pl.lit(1), pl.lit(1))
        c.check("bad_number", has_tres_mem & mem.is_null())
    req_mem = c.text("ReqMem")
    if req_mem is not None:
        # parsed in stage 2, and only where ReqTRES gave no memory
        c.values["_q_req_mem"] = sf.size_parts(pl.when(~has_tres_mem).then(req_mem))
        parts = pl.col("_q_req_mem")
        alloc_nodes = c.integer("AllocNodes", "NNodes")
        nodes = pl.col("req_nodes")
        if alloc_nodes is not None:
            nodes = nodes.fill_null(alloc_nodes)
        number = parts.struct.field("1").cast(pl.Float64)
        whole = (number == 0) & parts.struct.field("3").is_in(["c", "n"])
        c.check("bad_number", ~has_tres_mem & sf.has_text(req_mem) & number.is_null())
        c.repair("sacct_mem_whole_node", whole)
        per_job = sf.size_mib(parts, pl.col("req_cpus"), nodes)
        mem = mem.fill_null(pl.when(~whole.fill_null(False)).then(per_job))
    total = mem.round(0)
    c.check("absurd_value", total > sf.MAX_MEM_MIB)
    c.derived["req_mem_mib"] = pl.when(total <= sf.MAX_MEM_MIB).then(total.cast(pl.Int64))


def _tres(c: Columns, name: str) -> str | None:
    """``name`` if the export has this TRES column."""
    return name if c.layout.index(name) is not None else None


def _requests(c: Columns) -> None:
    tres = _tres(c, "ReqTRES")
    for col, name, key in (("req_cpus", "ReqCPUS", "cpu"), ("req_nodes", "ReqNodes", "node")):
        value = c.integer(name)
        if value is None and tres is not None:
            value = c.tres_count(tres, key, "req")
        c.values[col] = value if value is not None else _null()
    c.values["req_gpus"], c.values["req_gpu_type"] = c.gpus(tres, "req")
    c.values["req_gpu_milli"] = _null(pl.Int32())  # gres/gpu counts whole GPUs
    _walltime(c)
    _memory(c, tres)


def _outcome(c: Columns) -> None:
    tres = _tres(c, "AllocTRES")
    start = c.leaves.get("_p_Start")
    started = pl.col("_p_Start").is_not_null() if start is not None else pl.lit(True)
    for col, names, key in (("alloc_cpus", ("AllocCPUS", "NCPUS"), "cpu"),
                            ("alloc_nodes", ("AllocNodes", "NNodes"), "node")):
        value = c.integer(*names)
        if value is None and tres is not None:
            value = c.tres_count(tres, key, "alloc")
        c.values[col] = pl.when(started).then(value) if value is not None else _null()
    gpus, _ = c.gpus(tres, "alloc")
    c.values["alloc_gpus"] = pl.when(started).then(gpus)
    state_text = c.text("State")
    state = c.leaf("state", sf.state_of(state_text)) if state_text is not None else _null(
        pl.String())
    c.values["state"] = state.fill_null("unknown")
    c.repair("sacct_state_unrecognised", state.is_null())
    exit_text = c.text("ExitCode")
    if exit_text is None:
        c.values["exit_code"] = _null()
        return
    code = c.leaf("exit", sf.exit_status(exit_text))
    in_range = code.is_between(*_INT32)
    c.check("bad_number", code.is_null() & sf.has_text(exit_text))
    c.check("absurd_value", ~in_range)
    c.values["exit_code"] = pl.when(in_range & started).then(code)


def _elapsed(c: Columns) -> None:
    """run_time_s and wait_time_s: exact from Start/End/Submit, else from what the export
    has (Elapsed exactly; CPUTimeRAW and ResvCPURAW as estimates)."""
    lay, start, end = c.layout, pl.col("start_time"), pl.col("end_time")
    run: pl.Expr | None = None
    if lay.has("Start", "End"):
        run = (end - start).dt.total_seconds()
    elif lay.has("ElapsedRaw"):
        run = c.integer("ElapsedRaw")
    elif (t := c.text("Elapsed")) is not None:
        parts = c.leaf("Elapsed", sf.duration_parts(t))
        run = sf.duration_s(parts)
        c.check("bad_duration", sf.duration_bad(parts, t))
    elif lay.has("CPUTimeRAW"):
        exact = lay.has("AllocCPUS") or lay.has("NCPUS")
        cpus = pl.col("alloc_cpus" if exact else "req_cpus")
        run = pl.when(cpus > 0).then(_or_null(c.integer("CPUTimeRAW")) // cpus)
        if not exact:
            limit = pl.col("req_walltime_s")
            over = (run > limit).fill_null(False)
            c.repair("sacct_run_time_estimated", run.is_not_null() & ~over)
            c.repair("sacct_run_time_over_limit", over)
            run = pl.when(~over).then(run).when(pl.col("state") == "timeout").then(limit)
            c.notes.append(
                "no Start/End/Elapsed columns: run_time_s is CPUTimeRAW / ReqCPUS, exact only "
                "where a job was allocated the CPUs it requested (an estimate); where that "
                "exceeds the time limit the job had more CPUs than it asked for, so the run "
                "time is the limit for TIMEOUT jobs and unknown (null) for the others"
            )
            c.inferred["run_time_s"] = "estimated as CPUTimeRAW // ReqCPUS, at most Timelimit"
    wait: pl.Expr | None = None
    if lay.has("Start"):
        wait = (start - pl.col("submit_time")).dt.total_seconds()
    elif lay.has("ResvCPURAW"):
        cpus = pl.col("req_cpus")
        wait = pl.when(cpus > 0).then(_or_null(c.integer("ResvCPURAW")) // cpus)
        c.repair("sacct_wait_time_estimated", wait.is_not_null())
        c.notes.append(
            "no Start column: wait_time_s is ResvCPURAW / ReqCPUS, the reserved time counted "
            "from eligibility rather than submission (an estimate)"
        )
        c.inferred["wait_time_s"] = "estimated as ResvCPURAW // ReqCPUS"
    if run is not None:
        c.check("absurd_value", run > sf.MAX_DURATION_S)
    c.derived["run_time_s"] = run if run is not None else _null()
    c.derived["wait_time_s"] = wait if wait is not None else _null()
    if not lay.has("Start", "End"):
        c.notes.append("no Start/End columns: start_time and end_time cannot be derived")


def build_columns(fields: Fields, cfg: IngestConfig, layout: SacctLayout,
                  job_id: pl.Expr | None) -> Columns:
    """All job-table columns of one export (``job_id``: the id text of each row, or None
    when the export has no id column)."""
    c = Columns(fields, cfg, layout)
    _job_ids(c, job_id)
    _texts(c)
    _times(c)
    _requests(c)
    _outcome(c)
    _elapsed(c)
    return c
