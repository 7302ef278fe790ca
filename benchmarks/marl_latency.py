"""Latency of one select + allocate decision of the two-agent scheduler, on one CPU core.

Replays a GPU workload once with the exported artifact (:class:`hpcpolicy.deploy.marl
.MarlPolicy`), recording every decision the engine asks for: the queues on which the
selector chooses (two or more jobs fit) and the placements on which the allocator chooses
(two or more candidates). Then times, one call at a time, after a warm-up:

* ``select``: ``scorer.scores(queue view)``: the selector's features (oldest K waiting jobs,
  cluster), the exported scorer, the head-first ranking the engine reads;
* ``allocate``: ``placer.choose(placement view)``: the allocator's candidate features, the
  exported scorer, its choice;
* ``decision``: one ``select`` followed by one ``allocate`` (the bar: median <= 1 ms);

each with onnxruntime (intra-op threads 1), the only runtime hpcpolicy loads a policy with
(TorchScript runs code it carries, so no command opens it). Also reported,
from the replay: how long the engine took to list the candidate placements of each job
about to start (``engine_candidates``: every pool x first-available, best-fit and
topology-aware), which is the engine's work, not the policy's.

Writes JSON (``--out``, default ``benchmarks/results/marl_latency.json``) and prints one line.

Usage::

    python -m benchmarks.marl_latency   # untrained agents, K = 32, and
                                                         # benchmarks/builders/gpu_jobs.py's jobs
    python -m benchmarks.marl_latency --policy runs/marl/policy --table gpu.parquet \\
        --cluster examples/gpu-partition.toml
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks._common import RESULTS, ROOT, cpu_model

TARGET_MS = 1.0


def _stats(samples: list[float]) -> dict[str, float]:
    """Median / p95 / p99 of latencies in milliseconds."""
    s = np.sort(np.asarray(samples))
    return {"median_ms": float(np.median(s)), "p95_ms": float(np.quantile(s, 0.95)),
            "p99_ms": float(np.quantile(s, 0.99)), "calls": len(samples)}


def _record(policy: Any, workload: Any, cluster: Any) -> tuple[list[Any], list[Any], list[float]]:
    """Replay once; the queue views the selector chose on, the placement views the allocator
    chose on, and the engine's candidate-listing times (ms)."""
    from hpcpolicy.sim import SimConfig
    from hpcpolicy.sim.gpu_engine import GpuEngine

    queues: list[Any] = []
    places: list[Any] = []
    listing: list[float] = []
    cfg = SimConfig()
    scorer = policy.bind(workload, cluster, cfg)
    placer = policy.bind_placer(workload, cluster)

    class Recorder:
        def scores(self, view: Any) -> Any:
            fits = view.fits_now[:policy.artifact.k]
            if fits.sum() >= 2:
                queues.append(view)
            return scorer.scores(view)

        def choose(self, view: Any) -> int:
            if len(view.candidates) >= 2:
                places.append(view)
            return int(placer.choose(view))

    class Timed(GpuEngine):
        def candidates(self, j: int, pools: Any) -> Any:
            tic = time.perf_counter_ns()
            out = super().candidates(j, pools)
            if out:  # a job about to start
                listing.append((time.perf_counter_ns() - tic) / 1e6)
            return out

    recorder = Recorder()
    Timed(workload, cluster, cfg, recorder, recorder).run()
    return queues, places, listing


def _time(policy: Any, workload: Any, cluster: Any, queues: list[Any], places: list[Any],
          calls: int, warmup: int) -> dict[str, dict[str, float]]:
    """Select, allocate and select + allocate latencies with ``policy``'s backend."""
    from hpcpolicy.sim import SimConfig

    scorer = policy.bind(workload, cluster, SimConfig())
    placer = policy.bind_placer(workload, cluster)
    clock = time.perf_counter_ns
    out: dict[str, list[float]] = {"select": [], "allocate": [], "decision": []}
    for i in range(warmup + calls):
        q, p = queues[i % len(queues)], places[i % len(places)]
        t0 = clock()
        scorer.scores(q)
        t1 = clock()
        placer.choose(p)
        t2 = clock()
        if i >= warmup:
            out["select"].append((t1 - t0) / 1e6)
            out["allocate"].append((t2 - t1) / 1e6)
            out["decision"].append((t2 - t0) / 1e6)
    return {name: _stats(v) for name, v in out.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--policy", type=Path, help="two-agent artifact directory (default: "
                        "export untrained agents with the default networks)")
    parser.add_argument("--table", type=Path, help="GPU job table (default: 2,000 synthetic "
                        "GPU jobs, benchmarks/builders/gpu_jobs.py)")
    parser.add_argument("--cluster", type=Path, default=ROOT / "examples/gpu-partition.toml",
                        help="cluster spec (default examples/gpu-partition.toml)")
    parser.add_argument("--jobs", type=int, default=2000, help="jobs replayed (the first N)")
    parser.add_argument("--k", type=int, default=32, help="selector slots of the untrained "
                        "default policy")
    parser.add_argument("--calls", type=int, default=5000, help="timed decisions per backend")
    parser.add_argument("--warmup", type=int, default=500, help="untimed decisions first")
    parser.add_argument("--seed", type=int, default=0, help="seed of the untrained weights")
    parser.add_argument("--out", type=Path, default=RESULTS / "marl_latency.json",
                        help="where to write the JSON result")
    args = parser.parse_args(argv)

    import onnxruntime
    import torch

    from hpcpolicy.atomic import write_json
    from hpcpolicy.cluster_io import load_cluster
    from hpcpolicy.deploy.marl import MarlPolicy
    from hpcpolicy.gpu.topology import Topology
    from hpcpolicy.marl.artifact import export_marl
    from hpcpolicy.marl.config import MarlConfig
    from hpcpolicy.marl.features import max_candidates
    from hpcpolicy.marl.networks import TwoAgents
    from hpcpolicy.world import open_workload

    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    cluster = load_cluster(args.cluster)
    with tempfile.TemporaryDirectory() as tmp:
        table = args.table
        if table is None:
            from benchmarks.builders.gpu_jobs import write_gpu_table

            table = write_gpu_table(Path(tmp) / "gpu.parquet", n=args.jobs, seed=args.seed)
        workload = open_workload(table)
        workload = workload.take(np.arange(min(args.jobs, len(workload))))
        policy_dir = args.policy
        if policy_dir is None:
            cfg = MarlConfig(seed=args.seed)
            policy_dir = export_marl(TwoAgents(cfg), Path(tmp) / "policy", cfg=cfg, k=args.k,
                                     candidates=max_candidates(Topology.from_cluster(cluster)),
                                     metrics={})
        backends = {"onnx": MarlPolicy(policy_dir)}
        queues, places, listing = _record(backends["onnx"], workload, cluster)
        if not queues or not places:
            print("the replay asked neither agent to choose; give a busier workload",
                  file=sys.stderr)
            return 1
        results = {b: _time(p, workload, cluster, queues, places, args.calls, args.warmup)
                   for b, p in backends.items()}

    out: dict[str, Any] = {
        "benchmark": "marl_latency",
        "policy": str(args.policy) if args.policy else "untrained default agents",
        "k": backends["onnx"].artifact.k, "cluster": str(args.cluster),
        "table": str(args.table) if args.table else f"synthetic GPU jobs (seed {args.seed})",
        "jobs": len(workload), "selector_views": len(queues), "allocator_views": len(places),
        "mean_candidates": float(np.mean([len(v.candidates) for v in places])),
        "target_median_ms": TARGET_MS,
        "meets_target": all(r["decision"]["median_ms"] <= TARGET_MS for r in results.values()),
        "results": results,
        "engine_candidates": _stats(listing),
        "conditions": {
            "cpu": cpu_model(), "cpu_count": os.cpu_count(),
            "loadavg_1m": os.getloadavg()[0], "torch_threads": torch.get_num_threads(),
            "onnxruntime_intra_op_threads": 1, "python": sys.version.split()[0],
            "torch": torch.__version__, "onnxruntime": onnxruntime.__version__,
            "numpy": np.__version__,
        },
    }
    write_json(args.out, out)
    r = results
    print(f"marl decision K={out['k']}: select + allocate median "
          f"{r['onnx']['decision']['median_ms'] * 1000:.0f} us (p95 "
          f"{r['onnx']['decision']['p95_ms'] * 1000:.0f}) onnx; engine's "
          f"candidate listing {out['engine_candidates']['median_ms'] * 1000:.0f} us; target "
          f"{TARGET_MS * 1000:.0f} us: {'met' if out['meets_target'] else 'MISSED'} "
          f"[load {out['conditions']['loadavg_1m']:.2f}] -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
