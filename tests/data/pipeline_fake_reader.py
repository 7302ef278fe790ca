"""A tiny fake log reader for the ingest-pipeline and demo tests (a test fixture, not a format).

The fake format has one row per line, ``id,submit_epoch_s,run_s,cpus,kind``, and ``#`` comment
lines. ``kind`` is ``job`` (kept), ``step`` (folded into its job) or ``boom`` (the reader fails
while the pipeline is streaming); a submit time that is not a number is rejected as
``bad_number``; an empty ``cpus`` is repaired to 1 and flagged ``default_cpus``. Tests register
it in ``hpcpolicy.ingest.pipeline.READERS`` as ``pipeline_fake_reader:plan_fake``.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from hpcpolicy.errors import InputFormatError
from hpcpolicy.ingest import STEP_FOLDED, IngestConfig, ReaderPlan
from hpcpolicy.schema import JOB_COLUMNS

FAKE_HEADER = {"MaxProcs": 64, "TimeZoneString": "Europe/Stockholm"}
FAKE_NOTE = "fake reader: no wait times"


def _explode_on_boom(raw: pl.Series) -> pl.Series:
    if (raw.str.ends_with(",boom")).any():
        raise InputFormatError("fake reader: the stream broke mid-way")
    return raw


def plan_fake(path: Path, cfg: IngestConfig) -> ReaderPlan:
    """Plan a fake-format file lazily, as a real reader would."""
    lines = pl.scan_csv(path, has_header=False, separator="\x1f", quote_char=None,
                        schema={"_raw": pl.String}).with_row_index("_line", offset=1)
    parts = pl.col("_raw").str.split(",")
    submit = parts.list.get(1, null_on_oob=True).str.strip_chars().cast(pl.Int64, strict=False)
    run = parts.list.get(2, null_on_oob=True).cast(pl.Int64, strict=False)
    cpus = parts.list.get(3, null_on_oob=True).cast(pl.Int32, strict=False)
    kind = parts.list.get(4, null_on_oob=True)
    canonical = {c.name: pl.lit(None).cast(c.dtype) for c in JOB_COLUMNS}
    canonical.update({
        "job_id": parts.list.get(0),
        "user": pl.lit("u") + parts.list.get(0),
        "submit_time": pl.from_epoch(submit, time_unit="s"),
        "start_time": pl.from_epoch(submit, time_unit="s"),
        "end_time": pl.from_epoch(submit + run, time_unit="s"),
        "run_time_s": run,
        "req_cpus": cpus.fill_null(1),
        "alloc_cpus": cpus.fill_null(1),
        "state": pl.lit("completed"),
    })
    frame = (
        lines.filter(~pl.col("_raw").str.starts_with("#"))
        .with_columns(pl.col("_raw").map_batches(_explode_on_boom, return_dtype=pl.String))
        .select(
            *[expr.cast(col.dtype).alias(col.name)
              for col, expr in zip(JOB_COLUMNS, canonical.values(), strict=True)],
            pl.lit(str(path)).alias("_file"),
            pl.col("_line").cast(pl.Int64),
            pl.col("_raw"),
            pl.when(kind == "step").then(pl.lit(STEP_FOLDED))
            .when(submit.is_null()).then(pl.lit("bad_number"))
            .otherwise(None).alias("_reason"),
            (cpus.is_null() & submit.is_not_null() & (kind != "step"))
            .alias("_repair_default_cpus"),
        )
    )
    return ReaderPlan(frame=frame, source_format="swf", header=dict(FAKE_HEADER),
                      inferred={}, notes=[FAKE_NOTE])
