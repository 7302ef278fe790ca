"""Read the job logs of two public GPU-cluster traces, Helios and Philly, into the job table.

Both give one job per row with text timestamps (``2020-06-09 18:41:01``, no zone: read in
``--tz``, UTC by default) and differ in column names and state words, declared in
:data:`HELIOS_COLUMNS` / :data:`PHILLY_COLUMNS` and :mod:`hpcpolicy.ingest.gpu.layouts`.

*Helios* (SenseTime, ``cluster_log.csv`` in HeliosData): ``job_id`` -> ``job_id`` (and
``job_id_raw`` when a number), ``user``, ``vc`` (virtual cluster) -> ``partition``,
``jobname`` -> ``job_name``, ``gpu_num`` -> ``req_gpus``, ``cpu_num`` -> ``req_cpus``,
``node_num`` -> ``req_nodes``, ``state`` (Slurm words: COMPLETED, CANCELLED, FAILED, TIMEOUT,
NODE_FAIL, ...; Philly's Pass, Killed and Failed are accepted too, for Philly logs converted
to this layout) -> ``state``, ``submit_time``, ``start_time``, ``end_time``; ``duration``
(s) and ``queue`` (s) stand in for a missing end or start time.

*Philly* (Microsoft, ``cluster_job_log`` of msr-fiddle/philly-traces, whose JSON records are
flattened to one CSV row per job): ``jobid``, ``user``, ``vc`` -> ``partition``, ``gpus`` (the
job's GPU count) -> ``req_gpus``, ``status`` (Pass completed, Killed cancelled, Failed
failed) -> ``state``, ``submitted_time``, ``start_time`` (of the first attempt),
``end_time`` (of the last attempt); ``run_time_s`` therefore spans every attempt.

For both: a job with a start time and no end had not ended when the log was taken: it is
kept as ``running`` with ``run_time_s`` null (repair ``gpu_running_at_end``). A CPU or node
count of 0 is "not set" and stored as null (repair ``gpu_zero_request``). Requested walltime
and memory are not in these logs (null).

Rejects (first that applies): ``non_utf8``, ``field_count``, ``no_job_id``,
``no_submit_time``, ``bad_timestamp``, ``bad_number``, ``bad_state``, ``absurd_value``,
``end_before_start``, ``start_before_submit``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import polars as pl

from hpcpolicy.ingest import slurm_fields as sf
from hpcpolicy.ingest.config import IngestConfig
from hpcpolicy.ingest.csv_scan import read_header, scan_csv
from hpcpolicy.ingest.gpu.csv_reader import Fields
from hpcpolicy.ingest.gpu.layouts import HELIOS, PHILLY, CsvLayout
from hpcpolicy.ingest.plan import ReaderPlan

__all__ = ["HELIOS_COLUMNS", "PHILLY_COLUMNS", "PHILLY_STATES", "plan_helios", "plan_philly"]

PHILLY_STATES: dict[str, str] = {"Pass": "completed", "Killed": "cancelled", "Failed": "failed"}
"""Philly job status -> job state."""

HELIOS_COLUMNS: dict[str, str] = {
    "job_id": "job_id", "user": "user", "partition": "vc", "job_name": "jobname",
    "submit": "submit_time", "start": "start_time", "end": "end_time", "state": "state",
    "gpus": "gpu_num", "cpus": "cpu_num", "nodes": "node_num", "duration": "duration",
    "queue": "queue",
}
"""What each Helios column holds (keys are this module's names for them)."""

PHILLY_COLUMNS: dict[str, str] = {
    "job_id": "jobid", "user": "user", "partition": "vc", "submit": "submitted_time",
    "start": "start_time", "end": "end_time", "state": "status", "gpus": "gpus",
}
"""What each Philly column holds."""


def _helios_state(t: pl.Expr) -> pl.Expr:
    """A Slurm state word, or a Philly one (a Philly log in the Helios layout)."""
    return pl.coalesce(sf.state_of(t), _philly_state(t))


def _philly_state(t: pl.Expr) -> pl.Expr:
    return sf.lookup(t, PHILLY_STATES)  # type: ignore[arg-type]


def _columns(f: Fields, names: dict[str, str],
             state_of: Callable[[pl.Expr], pl.Expr]) -> dict[str, pl.Expr]:
    """The job-table columns from the text columns named by ``names`` (checks in ``f``);
    columns a file lacks are null in the scan, so they give null values."""

    def whole(key: str, high: int = sf.MAX_COUNT) -> pl.Expr:
        return f.whole(names[key], high) if key in names else pl.lit(None, pl.Int64)

    job_id = f.text(names["job_id"])
    f.check("no_job_id", job_id.is_null())
    submit = f.timestamp(names["submit"])
    f.check("no_submit_time", f.text(names["submit"]).is_null())
    state = state_of(f.text(names["state"]))
    f.check("bad_state", state.is_null())
    start = pl.coalesce(f.timestamp(names["start"]),
                        submit + pl.duration(seconds=whole("queue", sf.MAX_DURATION_S)))
    end = pl.coalesce(f.timestamp(names["end"]),
                      start + pl.duration(seconds=whole("duration", sf.MAX_DURATION_S)))
    cpus, nodes = whole("cpus"), whole("nodes")
    unfinished = start.is_not_null() & end.is_null()
    f.repair("gpu_running_at_end", unfinished)
    f.repair("gpu_zero_request", (cpus == 0) | (nodes == 0))
    return {
        "job_id": job_id,
        "job_id_raw": pl.when(job_id.str.contains(r"^[0-9]+$")).then(
            job_id.cast(pl.Int64, strict=False)),
        "job_name": f.text(names["job_name"]) if "job_name" in names else pl.lit(None),
        "user": f.text(names["user"]),
        "partition": f.text(names["partition"]),
        "submit_time": submit,
        "req_cpus": pl.when(cpus > 0).then(cpus),
        "req_nodes": pl.when(nodes > 0).then(nodes),
        "req_gpus": whole("gpus"),
        "start_time": start,
        "end_time": end,
        "run_time_s": (end - start).dt.total_seconds(),
        "wait_time_s": (start - submit).dt.total_seconds(),
        "state": pl.when(unfinished).then(pl.lit("running")).otherwise(state),
    }


def _plan(path: Path, cfg: IngestConfig, layout: CsvLayout, names: dict[str, str],
          state_of: Callable[[pl.Expr], pl.Expr], zone_hint: str) -> ReaderPlan:
    header = read_header(path, layout, cfg.limits)
    f = Fields(cfg.tz)
    frame = f.finish(scan_csv(path, header), _columns(f, names, state_of), str(path))
    notes = []
    if cfg.tz == "UTC":
        notes.append(f"{path.name}: timestamps were read as UTC; {zone_hint}")
    absent = [c for c in layout.optional if c not in header.index]
    if absent:
        notes.append(f"{path.name}: no column {', '.join(absent)}: left null")
    return ReaderPlan(frame=frame, source_format=layout.name,
                      header={"columns": list(header.index)},
                      inferred={"time_zone": cfg.tz}, notes=notes)


def plan_helios(path: Path, cfg: IngestConfig) -> ReaderPlan:
    """Plan reading a Helios ``cluster_log.csv`` (see the module docstring for the rules).

    Raises:
        InputFormatError: a required column (job_id, submit_time, state) is missing.

    Example:
        >>> import tempfile
        >>> from hpcpolicy.ingest import IngestConfig
        >>> p = Path(tempfile.mkdtemp()) / "cluster_log.csv"
        >>> _ = p.write_text("job_id,user,gpu_num,cpu_num,node_num,state,submit_time,"
        ...     "start_time,end_time\\n1001,uA,8,48,1,COMPLETED,2020-06-01 10:00:00,"
        ...     "2020-06-01 10:00:05,2020-06-01 12:00:05\\n")
        >>> plan = plan_helios(p, IngestConfig())
        >>> plan.frame.select("job_id", "state", "req_gpus", "run_time_s").collect().rows()
        [('1001', 'completed', 8, 7200)]
    """
    return _plan(path, cfg, HELIOS, HELIOS_COLUMNS, _helios_state,
                 "the trace does not state its zone: pass --tz if you know it")


def plan_philly(path: Path, cfg: IngestConfig) -> ReaderPlan:
    """Plan reading a Philly job log flattened to CSV (see the module docstring).

    Raises:
        InputFormatError: a required column (jobid, submitted_time, status) is missing.

    Example:
        A job killed after an hour, submitted at 2 a.m. Pacific time (9:00 UTC):

        >>> import tempfile
        >>> from hpcpolicy.ingest import IngestConfig
        >>> p = Path(tempfile.mkdtemp()) / "philly_jobs.csv"
        >>> _ = p.write_text("jobid,user,status,submitted_time,start_time,end_time,gpus\\n"
        ...     "application_1_0001,u01,Killed,2017-10-07 02:00:00,2017-10-07 02:00:30,"
        ...     "2017-10-07 03:00:30,1\\n")
        >>> plan = plan_philly(p, IngestConfig(tz="America/Los_Angeles"))
        >>> job = plan.frame.select("state", "submit_time", "run_time_s").collect().row(0)
        >>> job[0], job[1].isoformat(), job[2]
        ('cancelled', '2017-10-07T09:00:00+00:00', 3600)
    """
    return _plan(path, cfg, PHILLY, PHILLY_COLUMNS, _philly_state,
                 "the trace's utilisation logs print US Pacific time, so --tz "
                 "America/Los_Angeles is likely right")
