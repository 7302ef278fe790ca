"""A workload ready for simulation: numpy columns sorted by submit time.

Built from the canonical job table (``jobs.parquet``) under named conventions (which processor
count to use, what to do when the requested walltime is missing, which jobs to drop), so that
anyone can replay a peer's published figures by naming the same conventions.

Only :attr:`Workload.run_time` is ground truth; every other column is what the scheduler knew
at submit time. Integer arrays use no sentinels: options resolve missing values when the
workload is built, and the choices are recorded in :attr:`Workload.notes`. Jobs that cannot be
replayed are dropped *with a reason* (:data:`DROP_REASONS`), counted, and their ids kept in
:attr:`Workload.dropped`; nothing disappears silently.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import numpy.typing as npt

from hpcpolicy.compat import COMPAT_NAMES, compat_preset
from hpcpolicy.config import Config, choice
from hpcpolicy.durations import DURATION_HINT, parse_duration, round_up_duration
from hpcpolicy.errors import ConfigError, InputFormatError, SchemaValidationError
from hpcpolicy.textfmt import duration

if TYPE_CHECKING:
    import polars as pl

__all__ = [
    "DROP_REASONS",
    "PROCS_FROM",
    "WALLTIME_FALLBACKS",
    "JobIds",
    "Workload",
    "WorkloadOptions",
    "workload_options",
]

I64 = npt.NDArray[np.int64]
I32 = npt.NDArray[np.int32]


class JobIds:
    """Source job ids, left in the table's text column until something reads them.

    Turning 200,000 ids into Python strings costs about 10 ms, a tenth of a whole replay of
    HPC2N, and a replay that writes no per-job output reads only the ids it names in
    messages. The first read builds the object array; after that this behaves as that array
    does (``len``, indexing, ``np.asarray``, its methods).

    Example:
        >>> import polars as pl
        >>> ids = JobIds(pl.Series(["7", "8", "9"]))
        >>> len(ids), ids[1], ids._array is None
        (3, '8', True)
        >>> ids[np.array([True, False, True])].tolist()
        ['7', '9']
    """

    __slots__ = ("_array", "_column")

    def __init__(self, column: pl.Series) -> None:
        self._column = column
        self._array: npt.NDArray[np.object_] | None = None

    @property
    def column(self) -> pl.Series:
        """The ids as the table's text column (never turned into Python strings)."""
        return self._column

    @property
    def array(self) -> npt.NDArray[np.object_]:
        """The ids as an object array of str (built on first use)."""
        if self._array is None:
            self._array = self._column.to_numpy().astype(object, copy=False)
        return self._array

    def __len__(self) -> int:
        return len(self._column)

    def __getitem__(self, index: Any) -> Any:
        if self._array is None and isinstance(index, int | np.integer):
            return self._column[int(index)]  # one id: no need to build them all
        return self.array[index]

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> npt.NDArray[Any]:
        return np.asarray(self.array, dtype=dtype)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):  # not an array attribute (and not set up yet, mid-unpickling)
            raise AttributeError(name)
        return getattr(self.array, name)


PROCS_FROM = ("requested", "allocated", "max")
"""Values of :attr:`WorkloadOptions.procs_from`."""

WALLTIME_FALLBACKS = ("auto", "runtime", "max", "error")
"""Named values of :attr:`WorkloadOptions.walltime_fallback` (a number of seconds also works)."""

DROP_REASONS: dict[str, str] = {
    "no_run_time": "the log has no run time (the job never started, or was still running "
    "when the log was taken); replay such jobs anyway with --unknown-run-time SECONDS "
    "(simulate, evaluate, whatif)",
    "zero_run_time": "run time 0 (dropped only under drop_zero_runtime, as RLScheduler does)",
    "no_procs": "neither requested nor allocated processors are known (or both are 0)",
    "no_logged_start": "the log has no wait/start time (dropped only under "
    "drop_unlogged_start, as HPCOpt does)",
}
"""Why a job of the table is not in the workload; ``hpcpolicy simulate`` prints the counts."""

@dataclass(frozen=True)
class WorkloadOptions(Config):
    """How to turn the job table into a workload.

    Example:
        >>> WorkloadOptions.preset("rlscheduler").procs_from
        'max'
        >>> WorkloadOptions.preset("rlscheduler", procs_from="requested").procs_from
        'requested'
    """

    label: ClassVar[str] = "workload"

    procs_from: str = choice("requested", PROCS_FROM)
    """Processor count of a job: ``requested`` (req_cpus, else alloc_cpus where the request is
    unknown), ``allocated`` (alloc_cpus, else req_cpus) or ``max`` (the larger of the two).
    Nodes and GPUs follow the same rule with their req_/alloc_ columns."""
    walltime_fallback: str | int = "auto"
    """Planning time of a job whose req_walltime_s is null: ``runtime`` (its actual run time,
    "perfect estimates", as the Lublin model traces require), ``max`` (the longest request in
    its partition, else in the table: a stand-in for the partition limit), ``error`` (refuse),
    a number of seconds, or ``auto``: ``max`` when some jobs have a request, an error asking
    for a choice when none has."""
    drop_zero_runtime: bool = False
    """Drop jobs whose logged run time is 0 (kept by default: they still take a decision)."""
    unknown_run_time_s: int | None = None
    """Run time given to jobs whose log has none; None drops them (reason ``no_run_time``)."""
    drop_unlogged_start: bool = False
    """Drop jobs whose log has no wait/start time (HPCOpt's convention)."""
    compat: str | None = choice(None, COMPAT_NAMES)
    """Name of the preset these options started from (provenance only; see :meth:`preset`)."""

    def validate(self) -> None:
        if not (isinstance(self.walltime_fallback, int) and self.walltime_fallback > 0):
            self._one_of("walltime_fallback", WALLTIME_FALLBACKS,
                         also=f" or a positive length ({DURATION_HINT})")
        self._at_least(0, "unknown_run_time_s")

    @classmethod
    def preset(cls, compat: str | None, **explicit: Any) -> WorkloadOptions:
        """Options of the peer ``compat`` (or the defaults), overridden by ``explicit`` ones.

        Keyword arguments whose value is None are treated as "not given", so a command line
        can pass every option through unchanged.
        """
        names = set(cls.field_names()) - {"compat"}
        unknown = sorted(set(explicit) - names)
        if unknown:
            raise ConfigError(f"unknown workload option(s) {', '.join(unknown)}")
        base = cls(**compat_preset(compat).workload)
        given = {k: v for k, v in explicit.items() if v is not None}
        return replace(base, compat=compat, **given)

    @staticmethod
    def parse_walltime_fallback(text: str) -> str | int:
        """``--walltime-fallback`` text as an option value: a named fallback, or a length
        (``12h``, ``43200``, ``12:00:00``) as seconds.

        Example:
            >>> WorkloadOptions.parse_walltime_fallback("12h")
            43200
        """
        seconds = parse_duration(text)
        return text.strip() if seconds is None else seconds


@dataclass(frozen=True)
class Workload:
    """Jobs as parallel numpy arrays, sorted by (submit, original order).

    All times are whole seconds relative to :attr:`origin` (epoch seconds of t = 0).
    """

    job_id: npt.NDArray[np.object_] | JobIds
    """Source job ids (str), for output tables: an object array, or (from
    :meth:`from_table`) :class:`JobIds`, which becomes one when first read."""
    submit: I64
    """Submit time (s since origin), non-decreasing."""
    run_time: I64
    """Actual run time from the log (s); ground truth, never shown to policies."""
    req_walltime: I64
    """Requested walltime used for planning (s), after the documented fallback."""
    procs: I64
    """Processors (cores) the job occupies."""
    nodes: I64
    """Nodes requested (0 = any placement of ``procs`` cores)."""
    gpus: I64
    """GPUs the job occupies (0 for CPU jobs)."""
    mem_mib: I64
    """Memory requested, whole job (MiB; 0 = not constrained)."""
    user: I32
    """User code, an index into :attr:`users`."""
    partition: I32
    """Partition code, an index into :attr:`partitions`."""
    logged_start: I64
    """Start time recorded in the log (s since origin), or -1 where the log has none; used
    only to measure how well a replay reproduces the log."""
    gpu_share: I64 | None = None
    """Share of each GPU a job uses, in thousandths (460 = 0.46 of a GPU; 1000 = whole GPUs);
    None when every job uses whole GPUs. Read by the node-level GPU allocators."""
    gpu_type: I32 | None = None
    """Logged GPU type of each job, an index into :attr:`gpu_types`, -1 where unknown; None
    when the log names no type."""
    account: I32 | None = None
    """Account (bank) code of each job, an index into :attr:`accounts`; None when the log
    names no account. Read by the Slurm world's fair share and limits."""
    qos: I32 | None = None
    """QOS code of each job, an index into :attr:`qos_names`; None when the log names no
    QOS."""
    users: tuple[str, ...] = ()
    partitions: tuple[str, ...] = ()
    gpu_types: tuple[str, ...] = ()
    accounts: tuple[str, ...] = ()
    qos_names: tuple[str, ...] = ()
    origin: int = 0
    """Epoch seconds of t = 0."""
    notes: tuple[str, ...] = field(default=())
    """How missing values were resolved and which jobs were dropped, in words."""
    dropped: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """Job ids of the source table left out of the workload, by reason (:data:`DROP_REASONS`)."""
    options: WorkloadOptions | None = None
    """The options the workload was built with (None when built by hand)."""

    def __len__(self) -> int:
        return int(self.submit.shape[0])

    def take(self, index: npt.ArrayLike) -> Workload:
        """A new workload of the jobs at ``index`` (e.g. a window of consecutive jobs)."""
        idx = np.asarray(index)
        cols: dict[str, Any] = {name: getattr(self, name)[idx] for name in _ARRAY_FIELDS}
        gpu: dict[str, Any] = {name: None if getattr(self, name) is None
                               else getattr(self, name)[idx] for name in _GPU_FIELDS}
        return Workload(**cols, **gpu, users=self.users, partitions=self.partitions,
                        gpu_types=self.gpu_types, accounts=self.accounts,
                        qos_names=self.qos_names, origin=self.origin, notes=self.notes,
                        dropped=self.dropped, options=self.options)

    @classmethod
    def from_table(
        cls,
        source: str | Path | pl.DataFrame | pl.LazyFrame,
        *,
        options: WorkloadOptions | None = None,
    ) -> Workload:
        """Build a workload from the canonical job table.

        Args:
            source: path of a ``jobs.parquet`` written by ``hpcpolicy ingest``, or a Polars
                DataFrame/LazyFrame with the canonical columns (:mod:`hpcpolicy.schema`).
            options: conventions; defaults to :class:`WorkloadOptions()`.

        Returns:
            The jobs sorted by submit time (ties keep the table's order), with the dropped
            jobs' ids by reason in :attr:`dropped` and every choice in :attr:`notes`.

        Raises:
            InputFormatError: the file is missing, or the table is empty.
            SchemaValidationError: not a job table of this schema version, or required
                columns are missing.
            ConfigError: no job is left, or requested walltimes are missing and the options
                name no fallback.

        Example:
            >>> import polars as pl
            >>> from datetime import datetime, timezone
            >>> t0 = datetime(2024, 1, 1, tzinfo=timezone.utc)
            >>> df = pl.DataFrame({"job_id": ["1", "2"], "submit_time": [t0, t0],
            ...     "run_time_s": [60, 0], "req_cpus": [4, 2], "req_walltime_s": [600, None]})
            >>> w = Workload.from_table(df, options=WorkloadOptions(walltime_fallback="runtime"))
            >>> w.procs.tolist(), w.req_walltime.tolist()
            ([4, 2], [600, 0])
        """
        opts = options or WorkloadOptions()
        frame, label = _scan(source)
        table = _resolve(frame, opts).collect()
        if not table["submit"].is_sorted():  # logs are usually in submit order already
            table = table.sort("submit", maintain_order=True)
        if table.height == 0:
            raise InputFormatError(f"{label}: the job table is empty; there is nothing to replay")
        return _assemble(cls, table, label, opts)


_ARRAY_FIELDS = ("job_id", "submit", "run_time", "req_walltime", "procs", "nodes", "gpus",
                 "mem_mib", "user", "partition", "logged_start")
_GPU_FIELDS = ("gpu_share", "gpu_type", "account", "qos")
"""Optional per-job arrays (None when the log lacks the column)."""
_REQUIRED = ("job_id", "submit_time", "run_time_s")
_OPTIONAL = ("req_cpus", "alloc_cpus", "req_nodes", "alloc_nodes", "req_gpus", "alloc_gpus",
             "req_mem_mib", "req_walltime_s", "user", "partition", "start_time", "wait_time_s",
             "req_gpu_type", "req_gpu_milli", "account", "qos")


def _scan(source: str | Path | pl.DataFrame | pl.LazyFrame) -> tuple[pl.LazyFrame, str]:
    """A lazy frame of the table with every column the builder reads, and a label for errors."""
    import polars as pl

    from hpcpolicy.schema import polars_schema

    if isinstance(source, pl.DataFrame):
        frame, label = source.lazy(), "job table"
    elif isinstance(source, pl.LazyFrame):
        frame, label = source, "job table"
    else:
        from hpcpolicy.table import open_job_table  # checks file, schema version and columns

        frame, label = open_job_table(source).frame, str(source)
    try:
        names = frame.collect_schema().names()
    except pl.exceptions.PolarsError as exc:
        raise SchemaValidationError(f"{label}: cannot read the job table ({exc})") from None
    missing = [c for c in _REQUIRED if c not in names]
    if missing:
        raise SchemaValidationError(
            f"{label}: column(s) {', '.join(missing)} missing; a job table written by "
            "`hpcpolicy ingest` has them"
        )
    if "req_cpus" not in names and "alloc_cpus" not in names:
        raise SchemaValidationError(f"{label}: neither req_cpus nor alloc_cpus is present, so "
                                    "no job has a processor count")
    schema = polars_schema()
    absent = [pl.lit(None, dtype=schema[c]).alias(c) for c in _OPTIONAL if c not in names]
    return (frame.with_columns(absent) if absent else frame), label


def _positive(name: str) -> pl.Expr:
    import polars as pl

    col = pl.col(name).cast(pl.Int64)
    return pl.when(col > 0).then(col)


def _pick(requested: str, allocated: str, mode: str) -> pl.Expr:
    """One resource count under ``procs_from``; null when neither column holds a positive value."""
    import polars as pl

    req, alloc = _positive(requested), _positive(allocated)
    if mode == "requested":
        return pl.coalesce(req, alloc)
    if mode == "allocated":
        return pl.coalesce(alloc, req)
    return pl.max_horizontal(req, alloc)


def _resolve(frame: pl.LazyFrame, opts: WorkloadOptions) -> pl.LazyFrame:
    """Per job: the resolved columns, a drop reason (null = kept), in the table's order."""
    import polars as pl

    submit = pl.col("submit_time").dt.epoch("s")
    run = pl.col("run_time_s").cast(pl.Int64)
    if opts.unknown_run_time_s is not None:
        run = run.fill_null(opts.unknown_run_time_s)
    logged = pl.coalesce(pl.col("start_time").dt.epoch("s"),
                         submit + pl.col("wait_time_s").cast(pl.Int64))
    reason = (
        pl.when(pl.col("run").is_null()).then(pl.lit("no_run_time"))
        .when(pl.lit(opts.drop_zero_runtime) & (pl.col("run") == 0)).then(pl.lit("zero_run_time"))
        .when(pl.col("procs").is_null()).then(pl.lit("no_procs"))
        .when(pl.lit(opts.drop_unlogged_start) & pl.col("logged").is_null())
        .then(pl.lit("no_logged_start"))
    )
    mode = opts.procs_from
    return frame.select(
        pl.col("job_id").cast(pl.String),
        submit.alias("submit"),
        run.alias("run"),
        pl.col("run_time_s").is_null().alias("run_filled"),
        _positive("req_walltime_s").alias("walltime"),
        _pick("req_cpus", "alloc_cpus", mode).alias("procs"),
        _positive("alloc_cpus" if mode == "allocated" else "req_cpus").is_null().alias("fell_back"),
        _pick("req_nodes", "alloc_nodes", mode).fill_null(0).alias("nodes"),
        _pick("req_gpus", "alloc_gpus", mode).fill_null(0).alias("gpus"),
        _positive("req_mem_mib").fill_null(0).alias("mem"),
        _positive("req_gpu_milli").alias("gpu_share"),
        pl.col("req_gpu_type").cast(pl.String).alias("gpu_type"),
        pl.col("user").cast(pl.String).fill_null("(unknown)"),
        pl.col("partition").cast(pl.String).fill_null("(none)"),
        pl.col("account").cast(pl.String), pl.col("qos").cast(pl.String),
        logged.alias("logged"),
    ).with_columns(reason.alias("reason"))


def _walltime(kept: pl.DataFrame, label: str,
              opts: WorkloadOptions) -> tuple[pl.Series, list[str]]:
    """Planning walltimes with the fallback applied, and notes saying what was done."""
    have = kept["walltime"]
    missing = int(have.null_count())
    if missing == 0:
        return have, []
    n = kept.height
    choice = opts.walltime_fallback
    ask = ("choose --walltime-fallback runtime (perfect estimates: the actual run time), max "
           "(the longest request in the job's partition) or a length such as 12h")
    if choice == "error" or (choice in ("auto", "max") and missing == n):
        raise ConfigError(f"{label}: {missing} of {n} jobs have no requested walltime "
                          f"(req_walltime_s), which backfilling and SJF need; {ask}"
                          f"{_suggestion(kept.filter(kept['walltime'].is_null()))}")
    if choice == "runtime":
        return have.fill_null(kept["run"]), [
            f"{missing} of {n} jobs have no requested walltime: planned with their actual run "
            "time (perfect estimates)"]
    if isinstance(choice, int):
        return have.fill_null(choice), [
            f"{missing} of {n} jobs have no requested walltime: planned with {choice} s"]
    return _longest_request(kept)


def _longest_request(kept: pl.DataFrame) -> tuple[pl.Series, list[str]]:
    """Fallback ``max``: a job without a request is planned with the longest request of its
    partition, or, where its partition has none at all, of the whole log. The second is a
    guess from another partition's limit, so it is a warning that counts the jobs that ran
    past it."""
    import polars as pl

    n = kept.height
    frame = kept.select(
        "run", "partition", pl.col("walltime").is_null().alias("filled"),
        pl.col("walltime").max().over("partition").alias("own"))
    top = kept.filter(pl.col("walltime").is_not_null()).sort(
        "walltime", descending=True).row(0, named=True)
    longest, source = int(top["walltime"]), str(top["partition"])
    planned = kept["walltime"].fill_null(frame["own"]).fill_null(longest)
    notes = []
    own = frame.filter(pl.col("filled") & pl.col("own").is_not_null())
    if own.height:
        past = int((own["run"] > own["own"]).sum())
        notes.append(f"{own.height:,} of {n:,} jobs have no requested walltime: planned with "
                     "their partition's longest request (walltime fallback 'max')"
                     + (f"; {past:,} of them ran longer than that" if past else ""))
    guessed = frame.filter(pl.col("filled") & pl.col("own").is_null())
    if guessed.height:
        names = sorted(guessed["partition"].unique().to_list())
        parts = ("partition " if len(names) == 1 else "partitions ") + ", ".join(names)
        over = guessed.filter(pl.col("run") > longest)
        most = over["run"].max()
        ran = (f"{over.height:,} of them ran longer than that (up to "
               f"{duration(float(most))}), "  # type: ignore[arg-type]
               if over.height else "")
        notes.append(
            f"warning: {guessed.height:,} of {n:,} jobs ({guessed.height / n:.0%}) have no "
            f"requested walltime and neither has any job of their partition ({parts}): planned "
            f"with the longest request in the whole log, {duration(longest)} "
            f"({longest:,} s, from partition {source}); {ran}so backfilling plans them wrongly. "
            "Give the partition's real limit with --walltime-fallback LENGTH, or plan with "
            "the actual run times with --walltime-fallback runtime (perfect estimates)"
            f"{_suggestion(guessed)}")
    return planned, notes


def _suggestion(missing: pl.DataFrame) -> str:
    """A value for ``--walltime-fallback`` read from the run times of the jobs without a
    request: their 99th percentile, rounded up (by partition; the largest is suggested)."""
    import polars as pl

    if missing.height == 0:
        return ""
    p99 = missing.group_by("partition").agg(pl.col("run").quantile(0.99, "higher")).sort(
        "run", descending=True)
    top = p99.row(0, named=True)
    if top["run"] is None:
        return ""
    value = round_up_duration(float(top["run"]))
    where = f"partition {top['partition']}'s" if p99.height > 1 else "their"
    return (f"; {where} 99th-percentile run time is {duration(float(top['run']))}, so "
            f"--walltime-fallback {value} would cover 99 % of them")


def _codes(values: pl.Series) -> tuple[I32, tuple[str, ...]]:
    """Integer codes into the sorted distinct values (a polars Enum: fast on millions)."""
    import polars as pl

    names = values.unique().sort().to_list()
    codes = values.cast(pl.Enum(names)).to_physical().to_numpy()
    return codes.astype(np.int32), tuple(names)


def _optional_codes(values: pl.Series) -> tuple[I32 | None, tuple[str, ...]]:
    """Codes of an optional text column (nulls as ``(none)``), or None when all are null."""
    if values.null_count() == len(values):
        return None, ()
    return _codes(values.fill_null("(none)"))


def _split(table: pl.DataFrame) -> tuple[pl.DataFrame, dict[str, tuple[str, ...]]]:
    """The kept jobs, and the dropped jobs' ids by reason (reasons in alphabetical order)."""
    import polars as pl

    if table["reason"].null_count() == table.height:
        return table, {}
    lost = table.filter(pl.col("reason").is_not_null())
    dropped = {
        str(reason): tuple(ids)
        for reason, ids in lost.group_by("reason", maintain_order=True)
        .agg(pl.col("job_id")).sort("reason").iter_rows()
    }
    return table.filter(pl.col("reason").is_null()), dropped


def _assemble(cls: type[Workload], table: pl.DataFrame, label: str,
              opts: WorkloadOptions) -> Workload:
    """The workload from the resolved table (already in submit order)."""
    kept, dropped = _split(table)
    if kept.height == 0:
        counts = ", ".join(f"{k}: {len(v)}" for k, v in dropped.items())
        raise ConfigError(f"{label}: all {table.height} jobs were dropped ({counts}); "
                          "see `hpcpolicy simulate --help` for the options that keep them")
    walltime, wall_notes = _walltime(kept, label, opts)
    origin = int(kept["submit"][0])
    users, user_names = _codes(kept["user"])
    parts, part_names = _codes(kept["partition"])
    source_col = {"requested": "req_cpus", "allocated": "alloc_cpus", "max": "max(req_cpus, "
                  "alloc_cpus)"}[opts.procs_from]
    notes = [f"processors from {source_col}"]
    fell_back = int(kept["fell_back"].sum()) if opts.procs_from != "max" else 0
    if fell_back:
        other = "alloc_cpus" if opts.procs_from == "requested" else "req_cpus"
        notes.append(f"{fell_back} jobs lack {source_col}: their {other} is used")
    filled = int(kept["run_filled"].sum())
    if filled:
        notes.append(f"{filled} jobs without a logged run time replayed with "
                     f"{opts.unknown_run_time_s} s")
    notes += wall_notes
    notes += [f"dropped {len(ids)} jobs: {DROP_REASONS[r]}" for r, ids in dropped.items()]

    def i64(column: pl.Series) -> I64:
        return np.asarray(column.to_numpy(), dtype=np.int64)

    share = None if kept["gpu_share"].null_count() == kept.height else (
        i64(kept["gpu_share"].fill_null(1000).clip(upper_bound=1000)))
    gpu_type: I32 | None = None
    gpu_types: tuple[str, ...] = ()
    if kept["gpu_type"].null_count() < kept.height:
        codes, gpu_types = _codes(kept["gpu_type"].drop_nulls())
        gpu_type = np.full(kept.height, -1, dtype=np.int32)
        gpu_type[kept["gpu_type"].is_not_null().to_numpy()] = codes

    account, accounts = _optional_codes(kept["account"])
    qos, qos_names = _optional_codes(kept["qos"])
    return cls(
        job_id=JobIds(kept["job_id"]),
        submit=i64(kept["submit"] - origin),
        run_time=i64(kept["run"]),
        req_walltime=i64(walltime),
        procs=i64(kept["procs"]),
        nodes=i64(kept["nodes"]),
        gpus=i64(kept["gpus"]),
        mem_mib=i64(kept["mem"]),
        user=users,
        partition=parts,
        logged_start=i64((kept["logged"] - origin).fill_null(-1)),
        gpu_share=share,
        gpu_type=gpu_type,
        users=user_names,
        partitions=part_names,
        gpu_types=gpu_types,
        account=account,
        qos=qos,
        accounts=accounts,
        qos_names=qos_names,
        origin=origin,
        notes=tuple(notes),
        dropped=dropped,
        options=opts,
    )


def workload_options(compat: str | None, procs_from: str | None, walltime_fallback: str | None,
                     drop_zero_runtime: bool | None = None,
                     unknown_run_time: int | None = None) -> WorkloadOptions:
    """The workload conventions that the command-line options select (None: not given).

    Example:
        >>> workload_options(None, None, "3600").walltime_fallback
        3600
    """
    return WorkloadOptions.preset(
        compat, procs_from=procs_from, drop_zero_runtime=drop_zero_runtime,
        unknown_run_time_s=unknown_run_time,
        walltime_fallback=None if walltime_fallback is None
        else WorkloadOptions.parse_walltime_fallback(walltime_fallback))
