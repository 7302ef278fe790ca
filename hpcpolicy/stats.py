"""Workload profile of a job table: what an administrator wants to know about a log at a glance.

:func:`profile` reads ``jobs.parquet`` lazily and returns a plain, JSON-ready dict (its key
order is fixed): jobs, users, span, states, job size and runtime distributions, requested vs
actual runtime, waits, arrivals by hour and weekday, offered load vs machine size, top users
by core-hours and the GPU share. Conventions, stated once here and in the README:

* A job's *size* is what it was allocated where the log says (``alloc_*`` > 0), else what it
  requested (``req_*``): cancelled-before-start jobs often have no allocation.
* *Core-seconds* of a job = size in cpus x ``run_time_s``; jobs lacking either are left out of
  load and core-hour figures (their number is reported).
* *Over-request factor* = ``req_walltime_s / run_time_s`` over jobs with both known and a run
  time > 0; a factor below 1 means the job ran past its limit (as some logs record).
* *Offered load* = core-seconds demanded / (arrival span x machine cores), where the arrival
  span runs from the first to the last submit (and likewise for GPUs). The machine is the one
  ``hpcpolicy simulate`` would replay on (:func:`hpcpolicy.cluster_io.resolve_cluster`):
  ``--cluster FILE``, else ``--procs N``, else the log header (SWF ``MaxProcs``; ``MaxNodes``
  alone means one processor per node); otherwise it is reported as unknown.
* Arrivals by hour and weekday are counted in the log's local time: ``--tz`` if given, else
  the log header's ``TimeZoneString`` (SWF), else the ``--tz`` the log was ingested with
  (sacct prints local time), else UTC.

Each distribution is computed in its own lazy query over the few columns it needs, so memory
stays bounded by a couple of columns even for tables of tens of millions of jobs.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import polars as pl

from hpcpolicy.atomic import write_text
from hpcpolicy.errors import ConfigError
from hpcpolicy.ingest.config import check_time_zone
from hpcpolicy.schema import JOB_STATES
from hpcpolicy.table import JobTable, open_job_table

__all__ = ["PERCENTILES", "WEEKDAYS", "profile", "save_profile"]

PERCENTILES: tuple[float, ...] = (0.10, 0.25, 0.50, 0.75, 0.90, 0.99)
"""Percentiles of every distribution (linear interpolation, as numpy's default)."""

WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_TZ_KEYS = ("timezonestring",)


def _header_value(entries: list[dict[str, Any]], keys: tuple[str, ...]) -> list[Any]:
    """Values of any of ``keys`` (case-insensitive) in a list of header dicts."""
    return [v for entry in entries for k, v in entry.items() if k.lower() in keys]


@dataclass(frozen=True)
class _Machine:
    cores: int | None
    gpus: int | None
    source: str


def _machine(table: JobTable, procs: int | None, cluster: str | Path | None) -> _Machine:
    """The machine ``hpcpolicy simulate`` would replay the table on (its header as opened),
    or unknown."""
    from hpcpolicy.cluster_io import header_facts, resolve_cluster

    if procs is None and cluster is None and not header_facts(table):
        return _Machine(None, None, "the log header states neither MaxProcs nor MaxNodes; "
                        "pass --procs N or --cluster FILE")
    spec = resolve_cluster(spec=cluster, procs=procs, table=table)
    source = {"swf-header": "log header"}.get(spec.source, spec.source)
    return _Machine(spec.total_cores, spec.total_gpus or None, "; ".join((source, *spec.notes)))


def _time_zone(table: JobTable, tz: str | None) -> str:
    """The zone for arrival-by-hour figures (see the module docstring); invalid ones skipped."""
    if tz is not None:
        return check_time_zone(tz)
    ingest_tz = [table.metadata["tz"]] if "tz" in table.metadata else []
    for name in [*_header_value(table.headers, _TZ_KEYS), *ingest_tz]:
        with contextlib.suppress(ConfigError):
            return check_time_zone(str(name).strip())
    return "UTC"


def _size(name: str) -> pl.Expr:
    """Allocated resource where known and positive, else requested."""
    alloc, req = pl.col(f"alloc_{name}"), pl.col(f"req_{name}")
    return pl.when(alloc > 0).then(alloc).otherwise(req).cast(pl.Int64)


def _round(value: Any) -> Any:
    """Floats to 6 significant digits, so JSON is stable and readable; others unchanged."""
    return float(f"{value:.6g}") if isinstance(value, float) else value


def _hours(seconds: int | None) -> float:
    """Seconds (an exact integer sum) as hours, to 0.01 h."""
    return round(int(seconds or 0) / 3600, 2)


def _distribution(frame: pl.LazyFrame, expr: pl.Expr) -> dict[str, Any]:
    """Count of known values, min, percentiles, max and mean of ``expr`` (nulls left out)."""
    x = expr.alias("x")
    row = frame.select(x).select(
        pl.col("x").count().alias("known"),
        pl.col("x").min().cast(pl.Float64).alias("min"),
        pl.col("x").cast(pl.Float64).quantile(list(PERCENTILES), "linear").alias("q"),
        pl.col("x").max().cast(pl.Float64).alias("max"),
        pl.col("x").mean().alias("mean"),
    ).collect(engine="streaming").row(0, named=True)
    quantiles = row["q"] or [None] * len(PERCENTILES)
    out: dict[str, Any] = {"known": int(row["known"]), "min": _round(row["min"])}
    out.update({f"p{round(q * 100)}": _round(v) for q, v in zip(PERCENTILES, quantiles,
                                                                 strict=True)})
    out.update({"max": _round(row["max"]), "mean": _round(row["mean"])})
    return out


def _iso(value: Any) -> str | None:
    return value.isoformat() if isinstance(value, datetime) else None


def _overview(frame: pl.LazyFrame) -> dict[str, Any]:
    row = frame.select(
        pl.len().alias("jobs"),
        pl.col("submit_time").min().alias("first_submit"),
        pl.col("submit_time").max().alias("last_submit"),
        pl.col("end_time").max().alias("last_end"),
    ).collect(engine="streaming").row(0, named=True)
    # Distinct counts through group-by, which streams; n_unique would hold the whole column.
    partitions = frame.group_by("partition").agg().drop_nulls().select(pl.len())
    first, last = row["first_submit"], row["last_submit"]
    span_s = int((last - first).total_seconds()) if first is not None else 0
    return {
        "jobs": int(row["jobs"]),
        "users": None,  # filled in from the per-user table
        "partitions": int(partitions.collect(engine="streaming").item()) or None,
        "time_span": {
            "first_submit": _iso(first),
            "last_submit": _iso(last),
            "last_end": _iso(row["last_end"]),
            "arrival_span_s": span_s,
            "days": _round(span_s / 86400),
        },
    }


def _states(frame: pl.LazyFrame) -> dict[str, int]:
    counts = frame.group_by("state").agg(pl.len().alias("n")).collect(engine="streaming")
    found = {str(s): int(n) for s, n in counts.iter_rows()}
    return {s: found[s] for s in JOB_STATES if found.get(s)}


def _over_request(frame: pl.LazyFrame) -> dict[str, Any]:
    both = frame.filter(pl.col("req_walltime_s").is_not_null() & (pl.col("run_time_s") > 0))
    factor = pl.col("req_walltime_s") / pl.col("run_time_s")
    row = both.select(
        pl.len().alias("n"),
        (pl.col("run_time_s") > pl.col("req_walltime_s")).sum().alias("over"),
        (factor >= 2).sum().alias("double"),
    ).collect(engine="streaming").row(0, named=True)
    n = int(row["n"])
    return {
        "jobs_with_both": n,
        "factor": _distribution(both, factor),
        "share_ran_past_limit": _round(row["over"] / n) if n else None,
        "share_requested_2x_or_more": _round(row["double"] / n) if n else None,
    }


def _arrivals(frame: pl.LazyFrame, tz: str, days: float) -> dict[str, Any]:
    local = pl.col("submit_time").dt.convert_time_zone(tz)
    hours = frame.group_by(local.dt.hour().alias("k")).agg(pl.len().alias("n"))
    weekdays = frame.group_by(local.dt.weekday().alias("k")).agg(pl.len().alias("n"))
    by_hour, by_day = pl.collect_all([hours, weekdays], engine="streaming")
    hour_counts = dict(by_hour.iter_rows())
    day_counts = dict(by_day.iter_rows())
    total = int(by_hour["n"].sum())
    return {
        "time_zone": tz,
        "jobs_per_day_mean": _round(total / days) if days > 0 else None,
        "by_hour": [int(hour_counts.get(h, 0)) for h in range(24)],
        "by_weekday": {name: int(day_counts.get(i + 1, 0)) for i, name in enumerate(WEEKDAYS)},
    }


def _load(frame: pl.LazyFrame, span_s: int, machine: _Machine) -> dict[str, Any]:
    core_s = (_size("cpus") * pl.col("run_time_s")).alias("core_s")
    row = frame.select(core_s).select(
        pl.col("core_s").count().alias("n"), pl.col("core_s").sum().alias("total"),
    ).collect(engine="streaming").row(0, named=True)
    total = int(row["total"] or 0)
    mean_cores = total / span_s if span_s > 0 else None
    return {
        "jobs_with_size_and_runtime": int(row["n"]),
        "core_hours": _hours(total),
        "mean_cores_demanded": _round(mean_cores),
        "machine_procs": machine.cores,
        "machine_source": machine.source,
        "offered_load": _round(mean_cores / machine.cores)
        if mean_cores is not None and machine.cores else None,
    }


def _users(frame: pl.LazyFrame, top: int) -> tuple[int | None, list[dict[str, Any]]]:
    """Number of distinct known users, and the ``top`` users by core-hours."""
    per_user = frame.group_by("user").agg(
        pl.len().alias("jobs"),
        (_size("cpus") * pl.col("run_time_s")).sum().alias("core_s"),
    ).collect(engine="streaming")
    known = per_user["user"].drop_nulls().len()
    total = int(per_user["core_s"].sum() or 0)
    ranked = per_user.sort(["core_s", "jobs", "user"], descending=[True, True, False],
                           nulls_last=True).head(top)
    return known or None, [
        {
            "user": r["user"],
            "jobs": int(r["jobs"]),
            "core_hours": _hours(r["core_s"]),
            "share_core_hours": _round(int(r["core_s"] or 0) / total) if total else None,
        }
        for r in ranked.iter_rows(named=True)
    ]


def _gpus(frame: pl.LazyFrame, jobs: int, span_s: int, machine: _Machine) -> dict[str, Any] | None:
    gpus = _size("gpus")
    row = frame.select(
        (gpus > 0).sum().alias("gpu_jobs"),
        (gpus * pl.col("run_time_s")).sum().alias("gpu_s"),
    ).collect(engine="streaming").row(0, named=True)
    gpu_jobs = int(row["gpu_jobs"] or 0)
    if not gpu_jobs:
        return None
    types = (
        frame.filter(gpus > 0).group_by("req_gpu_type").agg(pl.len().alias("n"))
        .sort(["n", "req_gpu_type"], descending=[True, False], nulls_last=True)
        .collect(engine="streaming")
    )
    gpu_s = int(row["gpu_s"] or 0)
    return {
        "jobs": gpu_jobs,
        "share_jobs": _round(gpu_jobs / jobs),
        "gpu_hours": _hours(gpu_s),
        "by_type": {(t if t is not None else "unspecified"): int(n) for t, n in types.iter_rows()},
        "machine_gpus": machine.gpus,
        "offered_load": _round(gpu_s / span_s / machine.gpus) if span_s and machine.gpus
        else None,
    }


def profile(path: str | Path, *, procs: int | None = None, cluster: str | Path | None = None,
            tz: str | None = None, top_users: int = 10) -> dict[str, Any]:
    """Profile a job table: the figures ``hpcpolicy stats`` shows, as a JSON-ready dict.

    Args:
        path: a job table written by ``hpcpolicy ingest``.
        procs: machine size in cores; overrides the log header (SWF ``MaxProcs``).
        cluster: a cluster spec file (TOML/JSON, see ``examples/``); excludes ``procs``.
        tz: time zone for arrivals by hour and weekday; default the log's, else UTC.
        top_users: how many users to list by core-hours.

    Returns:
        A dict with fixed key order; see the module docstring for the conventions.

    Raises:
        InputFormatError, SchemaValidationError: see :func:`hpcpolicy.table.open_job_table`.
        ConfigError: ``procs`` < 1 or given with ``cluster``, a bad cluster file, headers
            that disagree on the machine size, ``top_users`` < 1 or an unknown ``tz``.

    Example:
        Two jobs 100 s apart (4 cores for 60 s, 2 cores for 30 s) on an 8-core machine ask
        for 300 of its 800 core-seconds:

        >>> import tempfile
        >>> from pathlib import Path
        >>> from hpcpolicy.ingest import ingest
        >>> d = Path(tempfile.mkdtemp())
        >>> _ = (d / "log.swf").write_text("1 0 5 60 4 -1 -1 4 100 -1 1 1 1 -1 1 -1 -1 -1\\n"
        ...                                "2 100 0 30 2 -1 -1 2 60 -1 1 1 1 -1 1 -1 -1 -1\\n")
        >>> _ = ingest([d / "log.swf"], d / "jobs.parquet")
        >>> p = profile(d / "jobs.parquet", procs=8)
        >>> p["load"]["offered_load"]
        0.375
    """
    if top_users < 1:
        raise ConfigError(f"top_users must be at least 1, not {top_users}")
    table = open_job_table(path)
    frame = table.frame
    machine = _machine(table, procs, cluster)
    zone = _time_zone(table, tz)
    out: dict[str, Any] = {
        "file": str(table.path),
        "schema_version": table.metadata.get("schema_version"),
        "source_format": table.metadata.get("source_format"),
    }
    out.update(_overview(frame))
    span_s = out["time_span"]["arrival_span_s"]
    out["states"] = _states(frame)
    out["size"] = {name: _distribution(frame, _size(name)) for name in ("cpus", "nodes", "gpus")}
    out["run_time_s"] = _distribution(frame, pl.col("run_time_s"))
    out["req_walltime_s"] = _distribution(frame, pl.col("req_walltime_s"))
    out["wait_time_s"] = _distribution(frame, pl.col("wait_time_s"))
    out["over_request"] = _over_request(frame)
    out["arrivals"] = _arrivals(frame, zone, span_s / 86400)
    out["load"] = _load(frame, span_s, machine)
    out["users"], out["top_users"] = _users(frame, top_users)
    out["gpu"] = _gpus(frame, out["jobs"], span_s, machine)
    return out


def save_profile(profile_: dict[str, Any], path: str | Path) -> Path:
    """Write a profile as indented JSON, atomically, keeping its key order.

    Example:
        >>> import tempfile
        >>> from pathlib import Path
        >>> d = Path(tempfile.mkdtemp())
        >>> save_profile({"jobs": 2, "load": {"offered_load": 0.375}}, d / "stats.json").name
        'stats.json'
        >>> json.loads((d / "stats.json").read_text())
        {'jobs': 2, 'load': {'offered_load': 0.375}}
    """
    write_text(path, json.dumps(profile_, indent=2) + "\n")
    return Path(path)
