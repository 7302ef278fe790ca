"""Read the Alibaba GPU cluster trace 2023 ("openb" pod lists) into the job table.

Each row of ``openb_pod_list_*.csv`` is one Kubernetes pod (a task) of a production
GPU-sharing cluster; a pod runs on one node. Times are seconds from the start of the trace,
which gives no date: they are placed after ``--origin`` (default
:data:`~hpcpolicy.ingest.config.DEFAULT_ORIGIN`, an arbitrary instant; the report says so).

Column mapping (pod list -> job table):

================  ============================================================================
``name``          ``job_id``
``cpu_milli``     ``req_cpus`` = cpu_milli / 1000 rounded up (repair ``alibaba_cpus_rounded_up``
                  where it is not whole); 0 is null (repair ``gpu_zero_request``)
``memory_mib``    ``req_mem_mib``
``num_gpu``       ``req_gpus``
``gpu_milli``     ``req_gpu_milli``: the share of each requested GPU in thousandths (460 = 0.46
                  of one GPU, 1000 = whole GPUs); null for pods that request no GPU
``gpu_spec``      ``req_gpu_type``, lower case (``v100m16|v100m32`` means either type); null
                  when empty, as in the default pod list
``qos``           ``qos`` (LS, BE, Burstable, Guaranteed); ``partition`` stays null: the QoS
                  is a class of service, not a set of nodes
``pod_phase``     ``state``: Succeeded completed, Failed failed, Pending pending, Unknown
                  unknown; Running: see below
creation_time     ``submit_time`` = origin + creation_time
scheduled_time    ``start_time`` (not for Pending pods, which never started)
deletion_time     ``end_time`` (not for pods still Running at the trace's end)
================  ============================================================================

``req_nodes`` is 1; ``user``, ``partition`` and ``req_walltime_s`` are null (the trace has
none; the workload builder's ``--walltime-fallback`` applies). ``run_time_s`` is end - start
and ``wait_time_s`` start - submit.

*Running pods*: Kubernetes reports a pod deleted while it runs as Running, so a Running pod
deleted before the trace's last deletion time ran until it was deleted: it becomes
``unknown`` (the outcome is not logged) with ``end_time`` = its deletion. Only the pods
deleted at that last moment were still running when the trace was taken: they stay
``running`` with ``end_time`` and ``run_time_s`` null (right-censored; the simulator drops
them, counted as ``no_run_time``). *Pending pods* are kept as ``pending`` with no start. The
ingest report's notes count each kind and say how long they had run or waited.

Rejects (first that applies): ``field_count``, ``non_utf8``, ``no_job_id``,
``no_submit_time``, ``bad_number`` (a number field that is not a whole number),
``bad_state``, ``bad_gpu_share`` (gpu_milli outside 0..1000, 0 with GPUs requested, or above
0 with none), ``absurd_value`` (negative), ``end_before_start`` (deletion before scheduling,
or before creation), ``start_before_submit`` (scheduled before created).

The node list of the same trace becomes the cluster spec
(:mod:`hpcpolicy.ingest.gpu.alibaba_nodes`):
``--node-list PATH``, else :data:`~hpcpolicy.ingest.gpu.alibaba_nodes.NODE_LIST_NAME` beside the
pod list when it is there.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from hpcpolicy.ingest import slurm_fields as sf
from hpcpolicy.ingest.cluster_toml import ClusterDoc
from hpcpolicy.ingest.config import DEFAULT_ORIGIN, IngestConfig, parse_origin
from hpcpolicy.ingest.csv_scan import read_header, scan_csv
from hpcpolicy.ingest.gpu.alibaba_nodes import NODE_LIST_NAME, read_node_list
from hpcpolicy.ingest.gpu.csv_reader import Fields
from hpcpolicy.ingest.gpu.layouts import ALIBABA_PODS
from hpcpolicy.ingest.plan import PassCheck, ReaderPlan

__all__ = ["PHASES", "plan_alibaba"]

PHASES: dict[str, str] = {"Succeeded": "completed", "Failed": "failed", "Running": "running",
                          "Pending": "pending", "Unknown": "unknown"}
"""Kubernetes pod phase -> job state."""

_ENDED = ("Succeeded", "Failed")
_LAST_TRACE_S = sf.MAX_DURATION_S
"""Largest plausible time offset (100 years of seconds)."""


def _columns(f: Fields, origin_ms: int) -> tuple[dict[str, pl.Expr], dict[str, pl.Expr]]:
    """The job-table columns of a pod list's text columns (checks registered in ``f``), and
    two more for the notes on pods the trace caught before they ended: ``_elapsed_s``
    (deletion - start, or - creation when not started) and ``_deleted_s``."""
    name = f.text("name")
    f.check("no_job_id", name.is_null())
    created = f.whole("creation_time", _LAST_TRACE_S)
    f.check("no_submit_time", f.text("creation_time").is_null())
    scheduled = f.whole("scheduled_time", _LAST_TRACE_S)
    deleted = f.whole("deletion_time", _LAST_TRACE_S)
    cpu_milli = f.whole("cpu_milli", sf.MAX_COUNT * 1000)
    num_gpu = f.whole("num_gpu")
    gpu_milli = f.whole("gpu_milli", high=None)
    phase = f.text("pod_phase")
    state = sf.lookup(phase, PHASES)  # type: ignore[arg-type]
    f.check("bad_state", state.is_null())
    f.check("bad_gpu_share", ~gpu_milli.is_between(0, 1000)
            | ((num_gpu > 0) & (gpu_milli == 0)) | ((num_gpu == 0) & (gpu_milli > 0)))
    f.check("start_before_submit", scheduled < created)
    f.check("end_before_start", deleted < pl.coalesce(scheduled, created))
    f.repair("gpu_zero_request", cpu_milli == 0)
    f.repair("alibaba_cpus_rounded_up", cpu_milli % 1000 != 0)

    def at(offset: pl.Expr) -> pl.Expr:
        return pl.from_epoch(offset * 1000 + origin_ms, time_unit="ms").dt.replace_time_zone(
            "UTC")

    censored = (phase == "Running") & (deleted == deleted.max())
    state = pl.when((phase == "Running") & ~censored).then(pl.lit("unknown")).otherwise(state)
    start = pl.when(phase != "Pending").then(scheduled)
    end = pl.when(phase.is_in(_ENDED) | ((phase == "Running") & ~censored)).then(deleted)
    return {
        "job_id": name,
        "qos": f.text("qos"),
        "submit_time": at(created),
        "req_cpus": pl.when(cpu_milli > 0).then((cpu_milli + 999) // 1000),
        "req_nodes": pl.lit(1),
        "req_gpus": num_gpu,
        "req_gpu_type": f.text("gpu_spec").str.to_lowercase(),
        "req_gpu_milli": pl.when(num_gpu > 0).then(gpu_milli),
        "req_mem_mib": f.whole("memory_mib", sf.MAX_MEM_MIB),
        "start_time": at(start),
        "end_time": at(end),
        "run_time_s": end - start,
        "wait_time_s": start - created,
        "state": state,
    }, {"_elapsed_s": deleted - pl.coalesce(start, created), "_deleted_s": deleted,
        "_phase_running": phase == "Running"}


def _cluster(path: Path, cfg: IngestConfig, notes: list[str],
             inferred: dict[str, Any]) -> ClusterDoc | None:
    """The cluster spec from ``--node-list`` or the node list beside the pod list, if any
    (recorded in ``inferred["node_list"]``)."""
    if cfg.node_list is not None:
        notes.append(f"cluster spec made from the node list {cfg.node_list} (--node-list)")
        inferred["node_list"] = {"value": cfg.node_list, "how": "given with --node-list"}
        return read_node_list(Path(cfg.node_list), cfg.limits)
    beside = path.parent / NODE_LIST_NAME
    if beside.is_file():
        notes.append(f"cluster spec made from the node list found beside the pod list: {beside} "
                     "(--node-list PATH picks another)")
        inferred["node_list"] = {"value": str(beside), "how": "found beside the pod list"}
        return read_node_list(beside, cfg.limits)
    notes.append(f"no node list given (--node-list) or found beside the pod list "
                 f"({NODE_LIST_NAME}): no cluster spec written")
    return None


def plan_alibaba(path: Path, cfg: IngestConfig) -> ReaderPlan:
    """Plan reading one Alibaba GPU-trace pod list (see the module docstring for the rules).

    Args:
        path: the pod list, plain or gzipped.
        cfg: ingest options: ``origin`` places the trace's times, ``node_list`` names the
            node list to make the cluster spec from.

    Returns:
        The lazy plan (one row per pod), with the cluster spec when a node list is found.

    Raises:
        InputFormatError: a column is missing, or the node list cannot be read.

    Example:
        >>> from hpcpolicy.ingest import IngestConfig
        >>> pods = Path("openb_pod_list_default.csv")
        >>> plan = plan_alibaba(pods, IngestConfig())  # doctest: +SKIP
        >>> plan.cluster.spec.total_nodes  # doctest: +SKIP
        1523
    """
    header = read_header(path, ALIBABA_PODS, cfg.limits)
    origin = parse_origin(cfg.origin or DEFAULT_ORIGIN, "--origin")
    f = Fields()
    values, extra = _columns(f, int(origin.timestamp() * 1000))
    frame = f.finish(scan_csv(path, header), values, str(path), extra)
    how = ("given with --origin" if cfg.origin else
           "an arbitrary default, as the trace gives no date; --origin sets another")
    notes = [f"{path.name}: times are seconds from the start of the trace, counted here from "
             f"{origin.isoformat()}: {how}"]
    inferred: dict[str, Any] = {"time_origin": {"value": origin.isoformat(), "how": how}}
    cluster = _cluster(path, cfg, notes, inferred)
    return ReaderPlan(
        frame=frame, source_format="alibaba", header={"columns": list(header.index)},
        inferred=inferred, notes=notes, cluster=cluster,
        after_pass=lambda _rows: _unfinished(path, frame),
    )


def _unfinished(path: Path, frame: pl.LazyFrame) -> PassCheck:
    """Notes on the running and pending pods the trace caught before they ended."""
    kept = frame.filter(pl.col("_reason").is_null())
    last = kept.select(pl.col("_deleted_s").max()).collect().item()
    summary = (kept.filter(pl.col("state").is_in(["running", "pending"]))
               .group_by("state").agg(
                   pl.len().alias("n"), (pl.col("_elapsed_s").sum() / 3600).alias("hours"),
                   pl.col("_elapsed_s").median().alias("median"),
                   )
               .collect())
    ran = (kept.filter((pl.col("state") == "unknown") & pl.col("_phase_running"))
           .select(pl.len()).collect().item())
    notes = [f"{path.name}: {ran:,} Running pods deleted before the trace's last deletion time "
             f"({last:,} s) ran until deleted: state 'unknown', end_time = deletion"] if ran else []
    for row in summary.sort("state").iter_rows(named=True):
        running = row["state"] == "running"
        if row["median"] is None:  # none of them has a deletion time to count to
            notes.append(f"{path.name}: {row['n']:,} {'Running' if running else 'Pending'} "
                         "pods have no deletion time: how long they "
                         f"{'ran' if running else 'waited'} is unknown")
        elif running:
            notes.append(
                f"{path.name}: {row['n']:,} Running pods deleted at the trace's last deletion "
                "time were still running: kept as 'running' with run_time_s null (the "
                "simulator drops them as no_run_time); they had run "
                f"{row['hours']:,.0f} pod-hours by then (median {row['median']:,.0f} s)")
        else:
            notes.append(
                f"{path.name}: {row['n']:,} Pending pods were never scheduled (start_time "
                f"null); they were deleted after waiting a median {row['median']:,.0f} s")
    return PassCheck(notes=tuple(notes))
