"""Scheduling metrics, defined once: the per-job outcome table and the run summary.

Per job (:func:`outcome_table`), with every time in whole seconds since the workload's origin:

* ``wait = start - submit``; ``run = end - start`` (the replayed run time: the logged one, or
  the requested walltime for a job killed at its limit); ``response = wait + run``;
* bounded slowdown with threshold :data:`TAU_S` = 10 s: ``bsld = max((wait + run) /
  max(run, 10), 1)``;
* slowdown ``response / run`` (null for a zero-second job, whose slowdown is unbounded).

A job that never started (it needs more than the machine has) has null start/end/wait and
``never_fits = True``; summaries count only started jobs.

Summary (:func:`summarize`), over the started jobs, keys exactly :data:`SUMMARY_KEYS`
(documented in ``schemas/sim_summary.schema.json``):

* wait percentiles use linear interpolation between order statistics (numpy's default);
* ``makespan_s`` = last end - first submit;
* ``utilization`` = core-seconds held (cores allocated x run, summed; the allocated cores
  are the job's processors, or its whole nodes' cores under exclusive nodes) / (cluster
  cores x the span),
  where the span is ``makespan_s`` (``utilization_end="last_end"``, the default) or
  last start - first submit (``"last_start"``, RLScheduler's convention, which can exceed 1);
  ``gpu_utilization`` likewise with GPUs, null on a machine without GPUs;
* ``throughput_jobs_per_h`` = jobs / makespan x 3600.

Several windows (:func:`aggregate`) follow the RLScheduler protocol: each metric is computed
per window, then averaged over windows (``jobs`` is summed).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from hpcpolicy.errors import ConfigError

if TYPE_CHECKING:
    import polars as pl

    from hpcpolicy.cluster import ClusterSpec
    from hpcpolicy.sim.types import SimResult
    from hpcpolicy.workload import Workload

__all__ = [
    "BREAKDOWN_KEYS",
    "OUTCOME_COLUMNS",
    "SUMMARY_KEYS",
    "TAU_S",
    "UTILIZATION_ENDS",
    "aggregate",
    "breakdown",
    "identity_columns",
    "outcome_table",
    "summarize",
    "write_outcomes",
]

TAU_S = 10
"""Bounded-slowdown threshold (s): runs shorter than this count as this long."""

SUMMARY_KEYS = (
    "jobs",
    "mean_wait_s",
    "p50_wait_s",
    "p95_wait_s",
    "p99_wait_s",
    "mean_response_s",
    "mean_bsld",
    "p95_bsld",
    "utilization",
    "gpu_utilization",
    "makespan_s",
    "throughput_jobs_per_h",
)
"""Keys of a run summary, in order."""

BREAKDOWN_KEYS = ("jobs", "mean_wait_s", "p95_wait_s", "mean_bsld", "core_hours")
"""Columns of a per-user or per-partition breakdown (besides the group column)."""

UTILIZATION_ENDS = ("last_end", "last_start")
"""Where the utilisation span ends: the last job's end, or (RLScheduler) its last start."""

OUTCOME_COLUMNS = (
    "job_id", "submit", "start", "end", "wait", "run", "response", "bsld", "slowdown",
    "procs", "gpus", "alloc_cores", "alloc_gpus", "req_walltime", "user", "partition",
    "logged_start", "never_fits", "killed", "backfilled",
)
"""Columns of the outcome table, in order."""


def outcome_table(workload: Workload, result: SimResult, *,
                  identity: bool = True) -> pl.DataFrame:
    """One row per job of ``workload``: what the replay did to it (see the module docstring).

    With ``identity=False`` the text columns (``job_id``, ``user``, ``partition``) are left
    out: enough for :func:`summarize`, and several times cheaper on large workloads.

    Example:
        >>> import numpy as np
        >>> from hpcpolicy.sim.types import SimResult
        >>> from hpcpolicy.workload import Workload
        >>> i = lambda *v: np.array(v, dtype=np.int64)
        >>> w = Workload(job_id=np.array(["a", "b"], dtype=object), submit=i(0, 0),
        ...     run_time=i(100, 5), req_walltime=i(100, 5), procs=i(1, 1), nodes=i(0, 0),
        ...     gpus=i(0, 0), mem_mib=i(0, 0), user=np.zeros(2, np.int32),
        ...     partition=np.zeros(2, np.int32), logged_start=i(-1, -1), users=("u",),
        ...     partitions=("p",))
        >>> r = SimResult(start=i(0, 100), end=i(100, 105), never_fits=np.zeros(2, bool),
        ...     killed=np.zeros(2, bool))
        >>> outcome_table(w, r)["bsld"].to_list()
        [1.0, 10.5]
    """
    import polars as pl

    started = result.start >= 0
    n = len(started)
    # Engines report what each job held; a hand-made result may leave these empty.
    cores = result.alloc_cores if len(result.alloc_cores) == n else workload.procs
    gpus = result.alloc_gpus if len(result.alloc_gpus) == n else workload.gpus
    backfilled = result.backfilled if len(result.backfilled) == n else np.zeros(n, bool)
    start = pl.Series("start", result.start, dtype=pl.Int64)
    end = pl.Series("end", result.end, dtype=pl.Int64)
    frame = pl.DataFrame({
        "submit": pl.Series(workload.submit, dtype=pl.Int64),
        "start": start,
        "end": end,
        "started": pl.Series(started),
    }).with_columns(
        pl.when("started").then(pl.col("start")).alias("start"),
        pl.when("started").then(pl.col("end")).alias("end"),
    ).with_columns(
        (pl.col("start") - pl.col("submit")).alias("wait"),
        (pl.col("end") - pl.col("start")).alias("run"),
    ).with_columns(
        (pl.col("wait") + pl.col("run")).alias("response"),
    ).with_columns(
        # max_horizontal skips nulls: keep bsld null for a job that never started
        pl.when("started").then(pl.max_horizontal(
            pl.col("response") / pl.max_horizontal(pl.col("run"), pl.lit(TAU_S)), pl.lit(1.0)
        )).alias("bsld"),
        pl.when(pl.col("run") > 0).then(pl.col("response") / pl.col("run")).alias("slowdown"),
        pl.Series("procs", workload.procs, dtype=pl.Int64),
        pl.Series("gpus", workload.gpus, dtype=pl.Int64),
        pl.Series("alloc_cores", np.where(started, cores, 0), dtype=pl.Int64),
        pl.Series("alloc_gpus", np.where(started, gpus, 0), dtype=pl.Int64),
        pl.Series("req_walltime", workload.req_walltime, dtype=pl.Int64),
        pl.Series("logged_start", workload.logged_start, dtype=pl.Int64),
        pl.Series("never_fits", result.never_fits, dtype=pl.Boolean),
        pl.Series("killed", result.killed, dtype=pl.Boolean),
        pl.Series("backfilled", backfilled, dtype=pl.Boolean),
    ).with_columns(
        pl.when(pl.col("logged_start") >= 0).then(pl.col("logged_start")).alias("logged_start"),
        pl.col("bsld").cast(pl.Float64),
        pl.col("slowdown").cast(pl.Float64),
    )
    if not identity:
        return frame.select(c for c in OUTCOME_COLUMNS if c not in _IDENTITY)
    return frame.with_columns(identity_columns(workload)).select(OUTCOME_COLUMNS)


_IDENTITY = ("job_id", "user", "partition")


def identity_columns(workload: Workload) -> list[pl.Series]:
    """The text columns of :func:`outcome_table` (``job_id``, ``user``, ``partition``): the
    same for every replay of ``workload``, so a caller with several replays can make them
    once and add them to each ``identity=False`` table (on 10 M jobs they cost about a
    second a replay)."""
    import polars as pl

    from hpcpolicy.workload import JobIds

    ids = workload.job_id
    # a table's ids stay an Arrow column: 10 M Python strings would take about 2 GB
    job_id = (ids.column.rename("job_id") if isinstance(ids, JobIds)
              else pl.Series("job_id", np.asarray(ids, dtype=object), dtype=pl.String))
    return [job_id, _names("user", workload.users, workload.user),
            _names("partition", workload.partitions, workload.partition)]


def _names(name: str, names: tuple[str, ...], codes: npt.NDArray[np.int32]) -> pl.Series:
    """Codes as their names (the codes themselves, as text, when no names are given)."""
    import polars as pl

    if not names:
        return pl.Series(name, codes.astype(str), dtype=pl.String)
    return pl.Series(name, names, dtype=pl.String).gather(codes)


def _stat(value: Any) -> float | None:
    """A polars scalar as a plain float (None for null/NaN)."""
    if value is None:
        return None
    value = float(value)
    return None if math.isnan(value) else value


def summarize(
    outcomes: pl.DataFrame,
    cluster: ClusterSpec,
    *,
    utilization_end: str = "last_end",
) -> dict[str, Any]:
    """The run summary over the started jobs of an outcome table (keys :data:`SUMMARY_KEYS`).

    Args:
        outcomes: from :func:`outcome_table`.
        cluster: the machine, for the utilisation denominators.
        utilization_end: ``last_end`` (the project's definition) or ``last_start``
            (RLScheduler's).

    Returns:
        A JSON-ready dict; a metric that is undefined (no started job, zero span, no GPUs)
        is None.

    Example:
        >>> import polars as pl
        >>> from hpcpolicy.cluster import ClusterSpec
        >>> o = pl.DataFrame({"submit": [0, 0], "start": [0, 100], "end": [100, 105],
        ...     "wait": [0, 100], "run": [100, 5], "response": [100, 105],
        ...     "bsld": [1.0, 10.5], "alloc_cores": [1, 1], "alloc_gpus": [0, 0]})
        >>> s = summarize(o, ClusterSpec.homogeneous(1))
        >>> s["mean_wait_s"], s["utilization"], s["makespan_s"]
        (50.0, 1.0, 105.0)
    """
    import polars as pl

    if utilization_end not in UTILIZATION_ENDS:
        raise ConfigError(f"utilization_end {utilization_end!r} is not one of "
                          f"{', '.join(UTILIZATION_ENDS)}")
    done = outcomes.filter(pl.col("start").is_not_null())
    row = done.select(
        pl.len().alias("jobs"),
        pl.col("wait").mean().alias("mean_wait_s"),
        *[pl.col("wait").quantile(q, "linear").alias(f"p{int(q * 100)}_wait_s")
          for q in (0.5, 0.95, 0.99)],
        pl.col("response").mean().alias("mean_response_s"),
        pl.col("bsld").mean().alias("mean_bsld"),
        pl.col("bsld").quantile(0.95, "linear").alias("p95_bsld"),
        (pl.col("alloc_cores") * pl.col("run")).sum().alias("core_s"),
        (pl.col("alloc_gpus") * pl.col("run")).sum().alias("gpu_s"),
        pl.col("submit").min().alias("first"),
        pl.col("start").max().alias("last_start"),
        pl.col("end").max().alias("last_end"),
    ).row(0, named=True)
    jobs = int(row["jobs"])
    makespan = _stat(row["last_end"] - row["first"]) if jobs else None
    span = _stat(row[utilization_end] - row["first"]) if jobs else None

    def share(used: Any, capacity: int) -> float | None:
        if not jobs or not capacity or not span:
            return None
        return float(used) / (capacity * span)

    summary: dict[str, Any] = {k: _stat(row[k]) for k in SUMMARY_KEYS if k in row}
    summary.update(
        jobs=jobs,
        utilization=share(row["core_s"], cluster.total_cores),
        gpu_utilization=share(row["gpu_s"], cluster.total_gpus),
        makespan_s=makespan,
        throughput_jobs_per_h=jobs / makespan * 3600.0 if makespan else None,
    )
    return {k: summary[k] for k in SUMMARY_KEYS}


def breakdown(outcomes: pl.DataFrame, by: str) -> pl.DataFrame:
    """Metrics of the started jobs per ``user`` or ``partition`` (columns :data:`BREAKDOWN_KEYS`).

    Sorted by core-hours (largest first), then by name, so the heaviest users lead.
    """
    import polars as pl

    if by not in ("user", "partition"):
        raise ConfigError(f"breakdown by {by!r}: use 'user' or 'partition'")
    return (
        outcomes.filter(pl.col("start").is_not_null())
        .group_by(by)
        .agg(
            pl.len().alias("jobs"),
            pl.col("wait").mean().alias("mean_wait_s"),
            pl.col("wait").quantile(0.95, "linear").alias("p95_wait_s"),
            pl.col("bsld").mean().alias("mean_bsld"),
            ((pl.col("alloc_cores") * pl.col("run")).sum() / 3600.0).alias("core_hours"),
        )
        .sort(["core_hours", by], descending=[True, False])
        .select(by, *BREAKDOWN_KEYS)
    )


def aggregate(summaries: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Summaries of several windows combined as RLScheduler does: the mean over windows.

    ``jobs`` is the total; a metric undefined in some windows is averaged over the others
    (None if undefined everywhere).

    Example:
        >>> a = dict.fromkeys(SUMMARY_KEYS, 1.0) | {"jobs": 4}
        >>> b = dict.fromkeys(SUMMARY_KEYS, 3.0) | {"jobs": 6, "gpu_utilization": None}
        >>> s = aggregate([a, b])
        >>> s["jobs"], s["mean_bsld"], s["gpu_utilization"]
        (10, 2.0, 1.0)
    """
    if not summaries:
        raise ConfigError("no windows to aggregate")
    out: dict[str, Any] = {"jobs": sum(int(s["jobs"]) for s in summaries)}
    for key in SUMMARY_KEYS[1:]:
        values = [float(s[key]) for s in summaries if s[key] is not None]
        out[key] = sum(values) / len(values) if values else None
    return out


def write_outcomes(outcomes: pl.DataFrame, path: str | Path,
                   metadata: Mapping[str, str] | None = None) -> None:
    """Write an outcome table to Parquet atomically, with ``hpcpolicy.*`` metadata."""
    from hpcpolicy.atomic import atomic_path

    with atomic_path(path) as tmp:
        outcomes.write_parquet(tmp, metadata=dict(metadata or {}))
