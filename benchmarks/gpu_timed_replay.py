"""Issue 44: the sharing allocators in the time-based replay of the Alibaba openb trace.

The pod list, ingested (``hpcpolicy ingest``: pods as jobs, the node list as the cluster
spec), is replayed by the node-level GPU engine with each allocator: pods arrive at their
logged times, run for their logged lengths (never-scheduled pods for
``--unknown-run-time``, as ``simulate`` replays them) and queue (FCFS with EASY backfilling)
when no node can take them. Measured on the last 30 % of the pods by arrival (the what-if's
``range=`` scenario cut there: a cold start), as logged, and under what-if scenarios
(``--scenario``): inter-arrival times divided (``load=``) and fewer nodes (``nodes=``).
As logged the trace holds under 1 % of the GPUs at any time and nothing queues; even all at
once its last 30 % asks for about a third of the cluster's GPUs.

Per allocator: the GPU allocation rate (GPU thousandths held over time, share of the
cluster's, :func:`hpcpolicy.sim.gpu_metrics.gpu_summary`), the mean bounded slowdown, the
mean wait and the engine's wall time. Writes ``<out>/gpu_timed_replay.json``.

Usage:
    python -m benchmarks.gpu_timed_replay --learned /tmp/glearn/allocator
    python -m benchmarks.gpu_timed_replay --allocators fgd bestfit --scenario "" load=40
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks._common import DATA, OPENB_PODS, RESULTS
from hpcpolicy.cluster import ClusterSpec
from hpcpolicy.cluster_io import load_cluster
from hpcpolicy.errors import HpcPolicyError
from hpcpolicy.gpu.registry import SHARING_ALLOCATORS
from hpcpolicy.sim import SimConfig, SimResult, simulate
from hpcpolicy.sim.gpu_metrics import gpu_summary
from hpcpolicy.sim.metrics import outcome_table, summarize
from hpcpolicy.whatif.scenarios import apply_scenario, parse_scenario
from hpcpolicy.workload import Workload, WorkloadOptions


def _table(cache: Path) -> Path:
    from hpcpolicy.ingest import IngestConfig, ingest

    table = cache / "openb.parquet"
    if not table.exists():
        cache.mkdir(parents=True, exist_ok=True)
        ingest([DATA / OPENB_PODS], table, IngestConfig(overwrite=True))
    return table


def _tail(workload: Workload, cluster: ClusterSpec, share: float,
          scenario: str) -> tuple[Workload, ClusterSpec]:
    """The last ``share`` of the pods by arrival, under a what-if scenario (``load=``,
    ``nodes=``)."""
    first = min(math.floor(len(workload) * (1 - share)), len(workload) - 1)
    tail = workload.take(np.arange(first, len(workload)))
    return (tail, cluster) if not scenario else apply_scenario(parse_scenario(scenario), tail,
                                                               cluster)


def _run(workload: Workload, cluster: ClusterSpec, allocator: str) -> dict[str, Any]:
    tic = time.perf_counter()
    result = simulate(workload, cluster, SimConfig(policy="fcfs", backfill="easy",
                                                   allocator=allocator))
    wall = time.perf_counter() - tic
    summary = summarize(outcome_table(workload, result), cluster)
    gpu = gpu_summary(workload, result, cluster)
    return {"gpu_allocation_pct": _allocation(workload, result, cluster),
            "gpu_utilization_to_last_end_pct": 100.0 * gpu["gpu_utilization"],
            "mean_bsld": summary["mean_bsld"], "mean_wait_s": summary["mean_wait_s"],
            "jobs": summary["jobs"], "never_fits": int(result.never_fits.sum()),
            "wall_s": wall}


def _allocation(workload: Workload, result: SimResult, cluster: ClusterSpec) -> float:
    """GPU thousandths held from the first to the last arrival, share (%) of the cluster's:
    the allocation rate while pods arrive (the what-if's utilisation to last submit)."""
    t0, t1 = int(workload.submit[0]), int(workload.submit[-1])
    ran = result.start >= 0
    held = np.clip(result.end[ran], t0, t1) - np.clip(result.start[ran], t0, t1)
    milli = result.placement["gpu_milli"][ran]
    return 100.0 * float((held * milli).sum()) / (cluster.total_gpus * 1000 * max(t1 - t0, 1))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--allocators", nargs="+", default=["fgd", "bestfit", "packing",
                                                             "best-fit", "first-available"],
                        help=f"any of the registry's ({', '.join(SHARING_ALLOCATORS)}, ...)")
    parser.add_argument("--learned", type=Path, help="also run this exported allocator")
    parser.add_argument("--tail", type=float, default=0.3)
    parser.add_argument("--scenario", nargs="+", default=["", "nodes=-90%,load=200"],
                        help="what-if scenarios ('' = as logged)")
    parser.add_argument("--unknown-run-time", type=int, default=3600)
    parser.add_argument("--out", type=Path, default=RESULTS)
    a = parser.parse_args(argv)
    names = [*a.allocators, *([str(a.learned)] if a.learned else [])]
    try:
        table = _table(a.out / "cache")
        cluster = load_cluster(table.with_suffix(".cluster.toml"))
        workload = Workload.from_table(table, options=WorkloadOptions(
            walltime_fallback="runtime", unknown_run_time_s=a.unknown_run_time))
        result: dict[str, Any] = {"tail": a.tail, "unknown_run_time_s": a.unknown_run_time}
        for scenario in a.scenario:
            part, machine = _tail(workload, cluster, a.tail, scenario)
            result[scenario or "as logged"] = {name: _run(part, machine, name)
                                               for name in names}
    except HpcPolicyError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / "gpu_timed_replay.json").write_text(json.dumps(result, indent=2) + "\n")
    for label in (s or "as logged" for s in a.scenario):
        for name, r in result[label].items():
            print(f"{label:>20} {name:<22} GPU allocation {r['gpu_allocation_pct']:6.2f} %  "
                  f"mean bsld {r['mean_bsld']:8.3f}  mean wait {r['mean_wait_s']:9.0f} s  "
                  f"{r['jobs']} pods ({r['never_fits']} never fit)  {r['wall_s']:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
