"""Run readers and write the canonical job table, the rejects and the ingest report.

One streaming pass (``polars.collect_all`` over lazy sinks that share the reader's scan) writes
``NAME.parquet`` and ``NAME.rejects.parquet`` to temporary files and counts rows by reason;
only when the counts balance is ``NAME.ingest.json`` written, and then the files replace the
old ones together (:func:`hpcpolicy.atomic.replace_together`): a killed ingest leaves all the
old files or all the new ones. An input that describes its machine (the Alibaba trace's node
list) also gets ``NAME.cluster.toml``, in the same set.
A reader whose rules need the whole file may ask for a second pass (``ReaderPlan.after_pass``).
The SHA-256 of each input is computed in a background thread while the pass runs (hashlib
works without the GIL); the Parquet metadata that holds it is written when the pass ends.

The job table is compressed with zstd at level :data:`ZSTD_LEVEL`: on 3 M sacct jobs level 1
took 2.07 CPU-seconds and 78 MB, Polars' default level 3 2.38 s and 75 MB, lz4 1.93 s and
130 MB, no compression 1.55 s and 212 MB (benchmarks/ingest.py inputs, 2-core machine).
"""

from __future__ import annotations

import importlib
import json
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import polars as pl

from hpcpolicy.atomic import file_sha256, json_text, replace_together
from hpcpolicy.errors import ConfigError, InputFormatError
from hpcpolicy.ingest.cluster_toml import ClusterDoc
from hpcpolicy.ingest.config import IngestConfig
from hpcpolicy.ingest.detect import detect_format, head_text
from hpcpolicy.ingest.plan import REPAIR_PREFIX, ROWS, STEP_FOLDED, PassCheck, ReaderPlan
from hpcpolicy.outlock import claim, release
from hpcpolicy.schema import (
    JOB_COLUMNS,
    LAST_EPOCH_S,
    METADATA_PREFIX,
    SCHEMA_VERSION,
    TIMESTAMP_DTYPE,
)
from hpcpolicy.version import __version__

__all__ = ["READERS", "IngestReport", "cluster_path", "ingest", "output_paths"]

READERS: dict[str, str] = {
    "swf": "hpcpolicy.ingest.swf.reader:plan_swf",
    "sacct": "hpcpolicy.ingest.sacct.reader:plan_sacct",
    "alibaba": "hpcpolicy.ingest.gpu.alibaba:plan_alibaba",
    "helios": "hpcpolicy.ingest.gpu.jobs:plan_helios",
    "philly": "hpcpolicy.ingest.gpu.jobs:plan_philly",
}
"""Format name -> ``module:function`` building a :class:`ReaderPlan` (imported on use)."""

REJECT_COLUMNS = ("source_file", "line", "job_id", "reason", "raw")
ZSTD_LEVEL = 1
"""zstd level of the job table (see the module docstring for the trade-off)."""
DUPLICATE = "duplicate_superseded"
_LINE_SPAN = 1 << 40
"""Line numbers stay below this, so ``_input * _LINE_SPAN + _line`` names one row."""


@dataclass
class IngestReport:
    """Counts and facts of one ingest; written as ``NAME.ingest.json``."""

    output: str
    rows_read: int
    jobs_kept: int
    rows_rejected: int
    steps_folded: int
    rejected_by_reason: dict[str, int]
    repaired_by_rule: dict[str, int]
    inputs: list[dict[str, Any]]
    time_span: dict[str, str | None]
    timings_s: dict[str, float]
    config: dict[str, Any]
    notes: list[str] = field(default_factory=list)
    cluster_spec: str | None = None
    """``NAME.cluster.toml`` when an input described its machine, else None."""
    schema_version: str = SCHEMA_VERSION
    hpcpolicy_version: str = __version__

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (the ``NAME.ingest.json`` document)."""
        return dict(self.__dict__)


def output_paths(out: Path) -> dict[str, Path]:
    """The three files an ingest to ``out`` (``NAME.parquet``) writes."""
    stem = out.name[: -len(".parquet")] if out.name.endswith(".parquet") else out.name
    return {
        "jobs": out.with_name(f"{stem}.parquet"),
        "rejects": out.with_name(f"{stem}.rejects.parquet"),
        "report": out.with_name(f"{stem}.ingest.json"),
    }


def cluster_path(out: Path) -> Path:
    """``NAME.cluster.toml``, the cluster spec an ingest to ``out`` writes when an input
    describes its machine."""
    jobs = output_paths(out)["jobs"]
    return jobs.with_name(jobs.name.removesuffix(".parquet") + ".cluster.toml")


def _reader(fmt: str) -> Callable[[Path, IngestConfig], ReaderPlan]:
    module, func = READERS[fmt].split(":")
    return getattr(importlib.import_module(module), func)  # type: ignore[no-any-return]


def _time_checked(reason: pl.Expr) -> pl.Expr:
    """``reason``, or for a row a reader would keep: ``no_submit_time`` without a submit time
    and ``absurd_value`` for a time outside 1970..9999 (every reader, whatever it parses)."""
    times = ("submit_time", "eligible_time", "start_time", "end_time")
    lo, hi = pl.lit(0).cast(TIMESTAMP_DTYPE), pl.lit(LAST_EPOCH_S * 1000).cast(TIMESTAMP_DTYPE)
    absurd = pl.any_horizontal([~pl.col(t).cast(TIMESTAMP_DTYPE).is_between(lo, hi)
                                for t in times]).fill_null(False)
    return (pl.when(reason.is_not_null()).then(reason)
            .when(pl.col("submit_time").is_null()).then(pl.lit("no_submit_time"))
            .when(absurd).then(pl.lit("absurd_value"))
            .otherwise(reason))


def _conform(plan: ReaderPlan) -> pl.LazyFrame:
    """The plan's frame with exactly the canonical columns (cast) + internal + repair flags."""
    names = plan.frame.collect_schema().names()
    missing = [c.name for c in JOB_COLUMNS if c.name not in names]
    if missing:  # a reader bug, not a user error
        raise AssertionError(f"{plan.source_format} reader lacks columns {missing}")
    repairs = [n for n in names if n.startswith(REPAIR_PREFIX)]
    return plan.frame.select(
        *[pl.col(c.name).cast(c.dtype) for c in JOB_COLUMNS],
        pl.col("_file").cast(pl.String),
        pl.col("_line").cast(pl.Int64),
        pl.col("_raw").cast(pl.String),
        _time_checked(pl.col("_reason").cast(pl.String)).alias("_reason"),
        (pl.col(ROWS) if ROWS in names else pl.lit(1)).cast(pl.Int64).alias(ROWS),
        *[pl.col(r).cast(pl.Boolean) for r in repairs],
    )


def _metadata(plans: Sequence[ReaderPlan], inputs: list[dict[str, Any]],
              cfg: IngestConfig) -> dict[str, str]:
    p = METADATA_PREFIX
    return {
        f"{p}schema_version": SCHEMA_VERSION,
        f"{p}tz": cfg.tz,  # the zone the log's zone-less times were read in (its local time)
        f"{p}version": __version__,
        f"{p}source_format": ",".join(sorted({pl_.source_format for pl_ in plans})),
        f"{p}sources": json.dumps(inputs, sort_keys=True, default=str),
        f"{p}header": json.dumps([pl_.header for pl_ in plans], sort_keys=True, default=str),
    }


def _iso(value: Any) -> str | None:
    return value.isoformat() if isinstance(value, datetime) else None


def ingest(
    inputs: Sequence[str | Path],
    out: str | Path,
    cfg: IngestConfig | None = None,
    on_stage: Callable[[str], None] | None = None,
) -> IngestReport:
    """Read logs, clean them, and write the job table, its rejects and an ingest report.

    Args:
        inputs: log files (SWF, sacct, GPU traces; plain or gzipped). Several files are
            concatenated.
        out: the job table path, ``NAME.parquet``; ``NAME.rejects.parquet``,
            ``NAME.ingest.json`` and, for an input that describes its machine,
            ``NAME.cluster.toml`` are written beside it.
        cfg: options; defaults to :class:`IngestConfig()`.
        on_stage: called with a short description as each stage begins (for progress output).

    Returns:
        The report that was written to ``NAME.ingest.json``.

    Raises:
        InputFormatError: an input cannot be read, or too many rows were rejected. Nothing
            is written in that case.
        ConfigError: conflicting options (``origin``/``node_list`` without an Alibaba pod
            list, inputs with different node lists), or outputs exist and ``overwrite`` is
            off.

    Example:
        >>> from hpcpolicy.ingest import ingest
        >>> report = ingest(["trace.swf"], "jobs.parquet")  # doctest: +SKIP
        >>> kept, rejected = report.jobs_kept, report.rows_rejected  # doctest: +SKIP
        >>> report.rows_read == kept + rejected + report.steps_folded  # doctest: +SKIP
        True
    """
    cfg = cfg or IngestConfig()
    stage = on_stage or (lambda _msg: None)
    if not Path(out).name.endswith(".parquet"):
        raise ConfigError(f"-o {out}: the job table must be named NAME.parquet")
    paths = output_paths(Path(out))
    if not inputs:
        raise ConfigError("no input files given")
    claim(*paths.values(), cluster_path(Path(out)))  # before looking: no other run passes too
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    hasher = ThreadPoolExecutor(max_workers=1, thread_name_prefix="hpcpolicy-sha256")
    try:
        existing = [str(p) for p in paths.values() if p.exists()]
        if existing and not cfg.overwrite:
            raise ConfigError(f"{', '.join(existing)} already exist; pass --overwrite to "
                              "replace")
        hashes = [hasher.submit(file_sha256, Path(p)) for p in inputs]
        plans, sources = _plans(inputs, cfg, stage)
        cluster_file = cluster_path(Path(out))
        cluster = _cluster_of(plans, cfg, cluster_file)
        timings["plan"] = time.perf_counter() - t0

        t1 = time.perf_counter()
        stage("reading, cleaning and writing (one streaming pass)")
        targets = [paths["jobs"], paths["rejects"], paths["report"]]
        stale = cluster is None and cfg.overwrite and cluster_file.exists()
        with replace_together(targets + ([cluster_file] if cluster else []),
                              remove=[cluster_file] if stale else []) as staged:
            tmp = {"jobs": staged[0], "rejects": staged[1]}
            count_df, checks = _write(plans, sources, hashes, cfg, tmp, inputs)
            if any(c.rerun for c in checks):
                stage("reading again: records of a job found later in the file")
                plans = [c.rerun or p for c, p in zip(checks, plans, strict=True)]
                count_df, again = _write(plans, sources, hashes, cfg, tmp, inputs)
                checks += again
            superseded = _superseded(plans, tmp["jobs"])
            if superseded is not None:
                stage("reading again: job ids given more than once")
                count_df, again = _write(plans, sources, hashes, cfg, tmp, inputs, superseded)
                checks += [*again, PassCheck(notes=(
                    f"{len(superseded):,} records of job ids that appear again later (in a "
                    "later input, or repeated within an SWF or GPU log) are rejected as "
                    f"{DUPLICATE}: the last record of each job is kept",))]
            timings["read_clean_write"] = time.perf_counter() - t1
            notes = [n for c in checks for n in c.notes]
            report = _report(paths, count_df, sources, plans, cfg, notes)
            _check_rejects(report, inputs, cfg)
            _cluster_note(cluster, cluster_file, report, staged[3:], stale)
            report.timings_s = {**timings, "total": time.perf_counter() - t0}
            # written last: the counts are final only now
            staged[2].write_text(json_text(report.to_dict()), encoding="utf-8")
    finally:
        hasher.shutdown(cancel_futures=True)
        release(*paths.values(), cluster_path(Path(out)))  # those not written
    return report


def _cluster_of(plans: list[ReaderPlan], cfg: IngestConfig, target: Path) -> ClusterDoc | None:
    """The cluster spec the inputs describe (one at most), checking the options that only
    Alibaba pod lists use and an existing ``NAME.cluster.toml`` before any work is done."""
    if not any(p.source_format == "alibaba" for p in plans):
        for option, value in (("--origin", cfg.origin), ("--node-list", cfg.node_list)):
            if value is not None:
                raise ConfigError(f"{option} applies to Alibaba GPU-trace pod lists only; "
                                  "none of the inputs is one (leave it out)")
    docs = [p.cluster for p in plans if p.cluster is not None]
    if len({d.spec.source for d in docs}) > 1:
        raise ConfigError(f"the inputs come with different node lists "
                          f"({', '.join(sorted({d.spec.source for d in docs}))}); ingest them "
                          "separately, or pass the right one with --node-list")
    if docs and target.exists() and not cfg.overwrite:
        raise ConfigError(f"{target} already exists; pass --overwrite to replace")
    return docs[0] if docs else None


def _cluster_note(doc: ClusterDoc | None, target: Path, report: IngestReport,
                  staged: list[Path], stale: bool) -> None:
    """Write the cluster spec to its staged file; note an older one that these inputs do not
    describe (removed with the commit under ``overwrite``: it would be taken for theirs)."""
    if doc is not None:
        staged[0].write_text(doc.to_toml(), encoding="utf-8")
        report.cluster_spec = str(target)
    elif stale:
        report.notes.append(f"removed {target}, written by an earlier ingest: these inputs "
                            "describe no machine")
    elif target.exists():
        report.notes.append(f"{target} is left as it was: it does not come from these inputs")


def _plans(inputs: Sequence[str | Path], cfg: IngestConfig,
           stage: Callable[[str], None]) -> tuple[list[ReaderPlan], list[dict[str, Any]]]:
    """The reader plan and the source facts of each input (hashes are added later)."""
    plans: list[ReaderPlan] = []
    sources: list[dict[str, Any]] = []
    for raw_path in inputs:
        path = Path(raw_path)
        if cfg.format == "auto":
            fmt = detect_format(path)
        else:
            head_text(path)  # missing, empty, a folder or a broken gzip: say so before reading
            fmt = cfg.format
        stage(f"planning {path.name} ({fmt})")
        plan = _reader(fmt)(path, cfg)
        plans.append(plan)
        sources.append({
            "path": str(path),
            "format": fmt,
            "bytes": path.stat().st_size,
            "header": plan.header,
            "inferred": plan.inferred,
        })
    return plans, sources


def _combined(plans: list[ReaderPlan], superseded: pl.Series | None) -> pl.LazyFrame:
    """Every plan's conformed frame, in input order, with the input's index (``_input``);
    the rows of ``superseded`` (keys of :func:`_superseded`) rejected as duplicates."""
    frames = [_conform(p).with_columns(pl.lit(i, dtype=pl.Int64).alias("_input"))
              for i, p in enumerate(plans)]
    frame = pl.concat(frames, how="diagonal_relaxed") if len(frames) > 1 else frames[0]
    if superseded is None:
        return frame
    key = pl.col("_input") * _LINE_SPAN + pl.col("_line")
    return frame.with_columns(
        pl.when(pl.col("_reason").is_null() & key.is_in(superseded.implode()))
        .then(pl.lit(DUPLICATE)).otherwise(pl.col("_reason")).alias("_reason"))


def _superseded(plans: list[ReaderPlan], jobs: Path) -> pl.Series | None:
    """Keys (``_input * 2**40 + _line``) of kept rows whose job id a later kept row has (a
    file given twice, an SWF log that repeats a job, SWF plus sacct of one machine), or None
    when the written table ``jobs`` holds each id once (checked on its job-id column alone;
    only then is the input read again to find the rows)."""
    ids = (pl.scan_parquet(jobs, glob=False).select("job_id")
           .filter(pl.col("job_id").is_duplicated()).unique().collect()["job_id"])
    if ids.is_empty():
        return None
    rows = (_combined(plans, None)
            .filter(pl.col("_reason").is_null() & pl.col("job_id").is_in(ids.implode()))
            .select("job_id", "_input", "_line").collect()
            .sort("_input", "_line"))
    earlier = pl.int_range(pl.len()).over("job_id") < pl.len().over("job_id") - 1
    return rows.filter(earlier).select(
        (pl.col("_input") * _LINE_SPAN + pl.col("_line")).alias("key"))["key"]


def _write(
    plans: list[ReaderPlan],
    sources: list[dict[str, Any]],
    hashes: list[Future[str]],
    cfg: IngestConfig,
    tmp: dict[str, Path],
    inputs: Sequence[str | Path],
    superseded: pl.Series | None = None,
) -> tuple[pl.DataFrame, list[PassCheck]]:
    """One streaming pass: write jobs and rejects to ``tmp``; return the counts by file and
    reason (with time span and repairs) and each reader's check of the pass."""
    frame = _combined(plans, superseded)
    repair_cols = [n for n in frame.collect_schema().names() if n.startswith(REPAIR_PREFIX)]
    kept = frame.filter(pl.col("_reason").is_null())
    rejected = frame.filter(pl.col("_reason").is_not_null() & (pl.col("_reason") != STEP_FOLDED))
    # One aggregate for counts, time span and repairs: a fourth query on the shared frame
    # would make Polars compute the whole frame a second time.
    counts = frame.group_by("_file", "_reason").agg(
        pl.col(ROWS).sum().alias("n"),
        pl.col("submit_time").min().alias("first_submit"),
        pl.col("submit_time").max().alias("last_submit"),
        pl.col("end_time").max().alias("last_end"),
        (pl.col("start_time").is_not_null() | pl.col("wait_time_s").is_not_null()).sum()
        .alias("with_start"),
        *[pl.col(r).fill_null(False).sum().alias(r) for r in repair_cols],
    )

    def metadata(_context: object) -> dict[str, str]:  # called as the file is finished
        return _metadata(plans, _hashed(sources, hashes), cfg)

    jobs_sink = kept.select([c.name for c in JOB_COLUMNS]).sink_parquet(
        tmp["jobs"], metadata=metadata, compression="zstd", compression_level=ZSTD_LEVEL,
        lazy=True)
    # The few rejected rows are copied out of the reader's text: Polars strings can be views
    # into one buffer per batch, and the rejects sink would keep every batch's buffer alive
    # until it has a row group's worth of rows (1.6 GB of 10 M sacct rows, 0 rejected).
    rejects_sink = rejected.select(
        pl.col("_file").alias("source_file"),
        pl.col("_line").alias("line"),
        *[pl.concat_str(pl.col(c), pl.lit("")).alias(name)
          for c, name in (("job_id", "job_id"), ("_reason", "reason"), ("_raw", "raw"))],
    ).sink_parquet(tmp["rejects"], lazy=True)
    try:
        _, _, count_df = pl.collect_all([jobs_sink, rejects_sink, counts])
    except pl.exceptions.ComputeError as exc:
        raise InputFormatError(f"{', '.join(map(str, inputs))}: {exc}") from None
    read = count_df.group_by("_file").agg(pl.col("n").sum())
    rows = dict(zip(read["_file"], read["n"], strict=True))
    checks = [p.after_pass(int(rows.get(src["path"], 0))) if p.after_pass else PassCheck()
              for p, src in zip(plans, sources, strict=True)]
    _hashed(sources, hashes)
    return count_df, checks


def _hashed(sources: list[dict[str, Any]], hashes: list[Future[str]]) -> list[dict[str, Any]]:
    """``sources`` with each file's SHA-256 (waiting for the background hashes)."""
    for src, digest in zip(sources, hashes, strict=True):
        src["sha256"] = digest.result()
    return sources


def _unknown_waits(kept: int, with_start: int) -> str:
    """The note on kept jobs whose wait is unknown (SWF wait -1, sacct start ``Unknown``)."""
    if with_start == 0:
        return (f"warning: none of the {kept:,} jobs has a start or wait time (the log's wait "
                "field is unknown throughout): their waits are unknown, so a replay cannot be "
                "checked against the log (no fidelity in what-if reports); the run times, "
                "sizes and submits are used as usual")
    return (f"{kept - with_start:,} of {kept:,} jobs have no start or wait time: their waits "
            "are unknown, and what-if fidelity uses the other jobs")


def _report(
    paths: dict[str, Path],
    count_df: pl.DataFrame,
    sources: list[dict[str, Any]],
    plans: list[ReaderPlan],
    cfg: IngestConfig,
    pass_notes: list[str],
) -> IngestReport:
    repair_cols = [c for c in count_df.columns if c.startswith(REPAIR_PREFIX)]
    summary_df = count_df.filter(pl.col("_reason").is_null()).select(
        pl.col("first_submit").min(), pl.col("last_submit").max(), pl.col("last_end").max(),
        *[pl.col(r).sum() for r in repair_cols],
    )
    by_reason: dict[str, int] = {}
    for src in sources:
        rows = count_df.filter(pl.col("_file") == src["path"])
        src["rows_read"] = int(rows["n"].sum())
        src["jobs_kept"] = int(rows.filter(pl.col("_reason").is_null())["n"].sum())
    for reason, n in count_df.group_by("_reason").agg(pl.col("n").sum()).iter_rows():
        if reason is not None and reason != STEP_FOLDED:
            by_reason[reason] = int(n)
    total = count_df["n"]
    reasons = count_df["_reason"]
    row = summary_df.row(0, named=True)
    steps = int(total.filter(reasons == STEP_FOLDED).sum())
    report = IngestReport(
        output=str(paths["jobs"]),
        rows_read=int(total.sum()),
        jobs_kept=int(total.filter(reasons.is_null()).sum()),
        rows_rejected=sum(by_reason.values()),
        steps_folded=steps,
        rejected_by_reason=dict(sorted(by_reason.items())),
        repaired_by_rule={r[len(REPAIR_PREFIX):]: int(row[r] or 0) for r in repair_cols},
        inputs=sources,
        time_span={k: _iso(row[k]) for k in ("first_submit", "last_submit", "last_end")},
        timings_s={},
        config=cfg.to_dict(),
        notes=list(dict.fromkeys([n for p in plans for n in p.notes] + pass_notes)),
    )
    with_start = int(count_df.filter(pl.col("_reason").is_null())["with_start"].sum())
    if report.jobs_kept and with_start < report.jobs_kept:
        report.notes.append(_unknown_waits(report.jobs_kept, with_start))
    assert report.rows_read == report.jobs_kept + report.rows_rejected + report.steps_folded
    return report


def _check_rejects(report: IngestReport, inputs: Sequence[str | Path], cfg: IngestConfig) -> None:
    """Refuse (writing nothing) when most rows were rejected: likely the wrong format."""
    considered = report.rows_read - report.steps_folded
    if considered == 0:
        raise InputFormatError(
            f"{', '.join(map(str, inputs))}: no job rows found (only headers or comments)"
        )
    share = report.rows_rejected / considered
    if share > cfg.max_reject_fraction:
        top = sorted(report.rejected_by_reason.items(), key=lambda kv: -kv[1])[:3]
        reasons = ", ".join(f"{k}: {v}" for k, v in top)
        raise InputFormatError(
            f"{', '.join(map(str, inputs))}: {share:.0%} of {considered} rows rejected "
            f"({reasons}); is --format right? (raise --max-reject-fraction to keep the rest)"
        )
