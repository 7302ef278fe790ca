"""GPU metrics of a node-level replay: exact GPU utilisation, fragmentation and spread.

* ``gpu_utilization``: GPU thousandths held x run time, summed, over (cluster GPUs x 1000 x
  span), the span as in :func:`hpcpolicy.sim.metrics.summarize` (first submit to last end). A
  job using 0.46 of a GPU counts 0.46 here (the pooled summary counts whole GPUs).
* ``effective_gpu_utilization``: the same with every GPU weighted by its speed (held time x
  speed over the speed-weighted capacity). On a machine of one GPU type it equals
  ``gpu_utilization``; with several, running a job on a fast GPU does not lower it, as it
  lowers the plain figure (the job holds the GPU for less time).
* ``gpu_fragmentation``: time average of the free whole GPUs on nodes that are partly in use,
  as a share of all GPUs (GPUs that a job wanting whole nodes can no longer get).
* ``multi_gpu_jobs``, ``spread_jobs`` (on more than one node), ``cross_rack_jobs``.
* ``spread_penalty_gpu_hours``: GPU-hours added by the spread penalty (0 when it is off):
  the cost of spreading, reported apart from the speed of the GPU types.
* ``mean_speed_factor``: mean run-time factor of the GPU jobs from GPU speeds (1 = as logged).

:func:`gpu_utilization_bound` is the ceiling of ``gpu_utilization`` for schedules that run
every job for its logged time: above it, a replay's utilisation comes only from jobs slowed
down (spread over nodes, or put on slower GPUs).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hpcpolicy.cluster import ClusterSpec
from hpcpolicy.gpu.topology import MILLI, Topology
from hpcpolicy.sim.gpu_engine import gpu_prepare, job_shares
from hpcpolicy.sim.types import SimConfig, SimResult
from hpcpolicy.workload import Workload

__all__ = ["GPU_KEYS", "gpu_summary", "gpu_utilization_bound", "mean_gpu_summary"]

GPU_KEYS = ("gpu_utilization", "effective_gpu_utilization", "gpu_fragmentation",
            "multi_gpu_jobs", "spread_jobs", "cross_rack_jobs", "spread_penalty_gpu_hours",
            "mean_speed_factor")
"""Keys of :func:`gpu_summary`, in order."""


def gpu_summary(workload: Workload, result: SimResult, cluster: ClusterSpec) -> dict[str, Any]:
    """The GPU metrics of one node-level replay (keys :data:`GPU_KEYS`).

    Example:
        >>> import numpy as np
        >>> from hpcpolicy.cluster import NodeGroup
        >>> from hpcpolicy.sim import SimConfig, simulate
        >>> z = np.zeros(2, dtype=np.int64)
        >>> w = Workload(job_id=np.array(["a", "b"], dtype=object), submit=z,
        ...     run_time=np.array([100, 100]), req_walltime=np.array([100, 100]),
        ...     procs=np.array([1, 1]), nodes=z, gpus=np.array([2, 4]), mem_mib=z,
        ...     user=z.astype(np.int32), partition=z.astype(np.int32), logged_start=z - 1)
        >>> spec = ClusterSpec((NodeGroup("g", 2, 8, gpus=4, gpu_type="a100"),))
        >>> r = simulate(w, spec, SimConfig(allocator="first-available"))
        >>> s = gpu_summary(w, r, spec)
        >>> s["gpu_utilization"], s["spread_jobs"]
        (0.75, 1)
    """
    place = result.placement
    started = result.start >= 0
    run = np.where(started, result.end - result.start, 0)
    milli = np.asarray(place["gpu_milli"], dtype=np.int64)
    gpu_jobs = started & (milli > 0)
    span = (int(result.end[started].max()) - int(workload.submit[started].min())
            if started.any() else 0)
    capacity = cluster.total_gpus * MILLI
    spread_s = np.asarray(place["spread_s"], dtype=np.int64)
    topo = Topology.from_cluster(cluster)
    speed_of_job = topo.pool_speed[np.maximum(result.group, 0)]
    speed_capacity = float((topo.node_gpu_milli * topo.pool_speed[topo.node_pool]).sum())
    speed = np.asarray(place["speed_factor"], dtype=np.float64)
    return {
        "gpu_utilization": (float((milli * run).sum()) / (capacity * span)
                            if capacity and span else None),
        "effective_gpu_utilization": (float((milli * run * speed_of_job).sum())
                                      / (speed_capacity * span)
                                      if speed_capacity and span else None),
        "gpu_fragmentation": result.stats.get("gpu_fragmentation"),
        "multi_gpu_jobs": int((gpu_jobs & (np.asarray(workload.gpus) > 1)).sum()),
        "spread_jobs": int((gpu_jobs & (place["nodes"] > 1)).sum()),
        "cross_rack_jobs": int((gpu_jobs & (place["racks"] > 1)).sum()),
        "spread_penalty_gpu_hours": float((milli * spread_s)[gpu_jobs].sum()) / MILLI / 3600,
        "mean_speed_factor": float(speed[gpu_jobs].mean()) if gpu_jobs.any() else None,
    }


def gpu_utilization_bound(workload: Workload, cluster: ClusterSpec,
                          cfg: SimConfig | None = None) -> float | None:
    """The highest ``gpu_utilization`` of a replay in which no job runs longer than logged.

    Every job the machine can hold starts as it is submitted and runs for its logged time
    (cut at its request under ``cfg.kill_at_limit``): GPU time held over (cluster GPUs x
    (latest such end - first submit)). Any replay's span is at least that long, and its GPU
    time is the same unless jobs are slowed down (the spread penalty, a slower GPU type) or
    sped up (a faster one). So with GPU speeds of 1 nothing but slowed-down jobs lifts a
    replay's utilisation above this figure. None without GPUs or jobs the machine can hold.

    Example:
        >>> import numpy as np
        >>> from hpcpolicy.cluster import NodeGroup
        >>> z = np.zeros(2, dtype=np.int64)
        >>> w = Workload(job_id=np.array(["a", "b"], dtype=object), submit=z,
        ...     run_time=np.array([100, 50]), req_walltime=np.array([100, 50]),
        ...     procs=np.array([1, 1]), nodes=z, gpus=np.array([4, 4]), mem_mib=z,
        ...     user=z.astype(np.int32), partition=z.astype(np.int32), logged_start=z - 1)
        >>> gpu_utilization_bound(w, ClusterSpec((NodeGroup("g", 2, 8, gpus=4),)))
        0.75
    """
    capacity = cluster.total_gpus * MILLI
    if not capacity:
        return None
    prep = gpu_prepare(workload, cluster, cfg or SimConfig(), Topology.from_cluster(cluster))
    held = ~prep.never_fits
    if not held.any():
        return None
    dur = prep.dur[held]
    submit = prep.submit[held]
    gpu_time = (np.asarray(workload.gpus, np.int64)[held] * job_shares(workload)[held] * dur).sum()
    span = int((submit + dur).max() - submit.min())
    return float(gpu_time) / (capacity * span) if span else None


def mean_gpu_summary(summaries: list[dict[str, Any]]) -> dict[str, Any]:
    """Several windows' GPU metrics: counts summed, the rest averaged over the windows that
    define them (the windowed protocol of :func:`hpcpolicy.sim.metrics.aggregate`)."""
    out: dict[str, Any] = {}
    for key in GPU_KEYS:
        values = [s[key] for s in summaries if s[key] is not None]
        if key.endswith("_jobs"):
            out[key] = int(sum(values))
        else:
            out[key] = float(np.mean(values)) if values else None
    return out
