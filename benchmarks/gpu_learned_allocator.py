"""Issue 44: the learned GPU-sharing allocator against FGD on held-out seeds.

1. Search the learned allocator's weights on the training seeds' draws
   (:func:`hpcpolicy.gpu.learned_allocator.search_weights`, from FGD's weights) and export it
   (``<out>/allocator/``: ONNX + manifest), or load one with ``--allocator``.
2. On the test seeds (never seen in training) run FGD and the learned allocator and compare,
   per seed, the GPUs left unallocated at 100 % and 130 % of arrived workload: the relative
   reduction, its mean and a 95 % t-interval over seeds.
3. Time the decisions: CPU seconds of a whole replay over its pods (features, scores, choice
   and update, compiled), and onnxruntime on one pod's feature matrix (all nodes).
4. The time-based replay (:mod:`hpcpolicy.gpu.timed_replay`, logged arrivals and run times):
   GPU allocation rate and mean bounded slowdown on the last 30 % of the trace, for FGD, the
   learned allocator and best fit.

Writes ``<out>/gpu_learned_allocator.json`` and prints a summary.

Usage:
    python -m benchmarks.gpu_learned_allocator                          # search, then test
    python -m benchmarks.gpu_learned_allocator --allocator runs/alloc   # test a saved one
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats

from benchmarks._common import DATA, RESULTS
from hpcpolicy.errors import HpcPolicyError
from hpcpolicy.gpu.allocator_artifact import export_allocator, load_allocator, onnx_scorer
from hpcpolicy.gpu.allocators import N_FEATURES
from hpcpolicy.gpu.inflation import InflationConfig, inflation_curve, run_inflation
from hpcpolicy.gpu.learned_allocator import SearchConfig, search_weights
from hpcpolicy.gpu.sharing import SharingNodes, SharingPods, read_nodes, read_pod_times, read_pods
from hpcpolicy.gpu.timed_replay import TimedConfig, timed_replay

PERCENTS = np.array([100, 130])


def _unallocated(nodes: SharingNodes, pods: SharingPods, cfg: InflationConfig
                 ) -> tuple[np.ndarray, float, int]:
    """GPU share (%) left unallocated at PERCENTS, CPU seconds of the run, pods placed."""
    start = time.process_time()
    run = run_inflation(nodes, pods, cfg)
    seconds = time.process_time() - start
    return 100.0 - inflation_curve(run, PERCENTS), seconds, len(run.node)


def _interval(values: np.ndarray) -> tuple[float, float, float]:
    mean = float(values.mean())
    half = float(stats.t.ppf(0.975, len(values) - 1) * values.std(ddof=1) / np.sqrt(len(values)))
    return mean, mean - half, mean + half


def _compare(nodes: SharingNodes, pods: SharingPods, weights: tuple[float, ...],
             seeds: list[int]) -> dict[str, Any]:
    fgd, learned, per_pod = [], [], []
    for seed in seeds:
        fgd.append(_unallocated(nodes, pods, InflationConfig(allocator="fgd", seed=seed))[0])
        u, seconds, count = _unallocated(
            nodes, pods, InflationConfig(allocator="learned", seed=seed, weights=weights))
        learned.append(u)
        per_pod.append(seconds / count * 1000.0)
    f, lrn = np.array(fgd), np.array(learned)
    out: dict[str, Any] = {"test_seeds": seeds, "ms_per_decision_cpu": float(np.mean(per_pod))}
    for k, p in enumerate(PERCENTS):
        reduction = 100.0 * (f[:, k] - lrn[:, k]) / f[:, k]
        mean, low, high = _interval(reduction)
        out[f"at_{p}"] = {"fgd_unallocated_pct": f[:, k].tolist(),
                          "learned_unallocated_pct": lrn[:, k].tolist(),
                          "relative_reduction_pct": {"mean": mean, "ci95": [low, high]}}
    return out


def _timed(nodes: SharingNodes, pods: SharingPods, path: Path,
           weights: tuple[float, ...]) -> dict[str, Any]:
    submit, run = read_pod_times(path)
    out = {}
    for name, w in (("fgd", ()), ("learned", weights), ("bestfit", ())):
        r = timed_replay(nodes, pods, submit, run, TimedConfig(allocator=name, weights=w))
        out[name] = {"allocation_rate_pct": r.allocation_rate,
                     "mean_bounded_slowdown": r.mean_bounded_slowdown,
                     "started": r.started, "never_started": r.never_started}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=Path, default=DATA / "openb_pod_list_default.csv")
    parser.add_argument("--nodes", type=Path, default=DATA / "openb_node_list_all_node.csv")
    parser.add_argument("--allocator", type=Path, help="a saved allocator folder: skip search")
    parser.add_argument("--train-seeds", nargs="+", type=int, default=[0, 1])
    parser.add_argument("--test-seeds", nargs="+", type=int, default=list(range(42, 52)))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--population", type=int, default=10)
    parser.add_argument("--out", type=Path, default=RESULTS)
    a = parser.parse_args(argv)
    if set(a.train_seeds) & set(a.test_seeds):
        print("error: --train-seeds and --test-seeds overlap; keep the test seeds unseen",
              file=sys.stderr)
        return 1
    try:
        nodes = read_nodes(a.nodes)
        pods = read_pods(a.pods, nodes.models)
        result: dict[str, Any] = {}
        if a.allocator is None:
            cfg = SearchConfig(train_seeds=tuple(a.train_seeds), rounds=a.rounds,
                               population=a.population)
            found = search_weights(nodes, pods, cfg, report=lambda r, m, b: print(
                f"round {r}: mean's return {m:.3f}, best candidate {b:.3f}", flush=True))
            a.allocator = a.out / "allocator"
            export_allocator(found.weights, a.allocator,
                             {"search": cfg.to_dict(), "fgd_return": found.start,
                              "best_return": found.best, "history": found.history})
            result["search"] = {"fgd_return": found.start, "best_return": found.best,
                                "history": found.history}
        weights = load_allocator(a.allocator)
        result.update(weights=weights, allocator=str(a.allocator))
        result.update(_compare(nodes, pods, weights, a.test_seeds))
        result["timed_last_30pct"] = _timed(nodes, pods, a.pods, weights)
        scorer = onnx_scorer(a.allocator)
        x = np.random.default_rng(0).random((len(nodes.cpu), N_FEATURES)).astype(np.float32)
        start = time.perf_counter()
        for _ in range(200):
            scorer(x)
        result["onnx_ms_per_decision"] = (time.perf_counter() - start) / 200 * 1000.0
    except HpcPolicyError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / "gpu_learned_allocator.json").write_text(json.dumps(result, indent=2) + "\n")
    for p in PERCENTS:
        r = result[f"at_{p}"]["relative_reduction_pct"]
        print(f"at {p} %: learned leaves {r['mean']:.1f} % fewer GPUs unallocated than FGD "
              f"(95 % interval {r['ci95'][0]:.1f} to {r['ci95'][1]:.1f})")
    for name, t in result["timed_last_30pct"].items():
        print(f"timed replay, last 30 %, {name}: allocation {t['allocation_rate_pct']:.3f} %, "
              f"mean bounded slowdown {t['mean_bounded_slowdown']:.3f}")
    print(f"decision: {result['ms_per_decision_cpu']:.3f} ms CPU (compiled replay), "
          f"{result['onnx_ms_per_decision']:.3f} ms (onnxruntime, {len(nodes.cpu)} nodes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
