"""The GPU-partition bars: the two-agent scheduler against the nine baselines, and topology.

Per workload (:mod:`gpu_workloads`: ``hpc2n-gpu`` on examples/gpu-partition.toml, and
``alibaba`` on a cut of its own cluster), with the spread penalty ``--spread-penalty``:

1. *topology*: every baseline policy (FCFS, LCFS, SJF) with first-available and with
   topology-aware allocation on the held-out windows; the bar is that topology-aware gives
   the lower mean bounded slowdown with the penalty on;
2. *learning*: ``hpcpolicy train --algo marl`` on the earliest ``--train-frac`` of the jobs
   for ``--minutes`` (stopped like a Ctrl-C at the deadline; the policy is exported), then
   :func:`hpcpolicy.evaluate.evaluate` with the nine baselines ({FCFS, LCFS, SJF} x
   {first-available, best-fit, topology-aware}) on ``--windows`` windows of the later jobs;
   the bar is a lower mean bounded slowdown *and* a higher GPU utilisation than the best
   baseline on each. ``--dqn`` also trains and evaluates the online GPU-type DQN.

Each workload also gets ``util_bound_no_slowdown``: the most GPU utilisation any schedule
reaches on the test windows while every job runs for its logged time
(:func:`hpcpolicy.sim.gpu_metrics.gpu_utilization_bound`, averaged over the windows; null when
GPU speeds differ). A policy above it has slowed jobs down, e.g. by spreading them over nodes.

Writes JSON (default ``benchmarks/results/gpu_quality.json``) and prints one line.

Usage:
    python -m benchmarks.gpu_quality --minutes 20
    python -m benchmarks.gpu_quality --workloads hpc2n-gpu --minutes 2 --windows 3   # a try
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks import gpu_workloads
from benchmarks._common import RESULTS, TRAIN_FRAC
from benchmarks.cli import train_until

WORKLOADS: dict[str, tuple[Callable[[Path], tuple[Path, Path]], list[str]]] = {
    # name: (builder, train options)
    "hpc2n-gpu": (lambda cache: gpu_workloads.hpc2n_gpu(cache, 12.0), []),
    "alibaba": (lambda cache: gpu_workloads.alibaba(cache, 64.0, 0.01),
                ["--walltime-fallback", "runtime"]),
}
"""Workload builders (arrival compression and cluster cut chosen so that jobs queue)."""
MARGIN_S = 10.0


def with_penalty(spec: Path, penalty: float, cache: Path) -> Path:
    """A copy of the cluster spec ``spec`` with its GPU spread penalty set, for training and
    evaluation alike (a spec that sets one already is used as it is)."""
    text = spec.read_text()
    if "[gpu]" in text:
        return spec
    out = cache / f"{spec.stem}-penalty{penalty:g}.toml"
    out.write_text(f"{text.rstrip()}\n\n[gpu]\nspread_penalty = {penalty!r}\n")
    return out


def _evaluation(table: Path, spec: Path, policies: tuple[str, ...], options: list[str],
                a: argparse.Namespace) -> tuple[Any, Any]:
    """The evaluation of the nine baselines and ``policies``, and the machine."""
    from hpcpolicy.commands._options import workload_options
    from hpcpolicy.env.factory import load
    from hpcpolicy.evaluate import GPU_ALLOCATORS, GPU_BASELINES, EvaluateConfig, evaluate

    fallback = options[1] if options else None
    workload, machine = load(table, workload_options(None, None, fallback).to_dict(),
                             str(spec), None)
    cfg = EvaluateConfig(policies=(*GPU_BASELINES, *policies), allocators=GPU_ALLOCATORS,
                         windows=a.windows, window_size=a.window_size, seed=a.seed,
                         train_frac=a.train_frac)
    return evaluate(workload, machine, cfg), machine


def _row(ev: Any, run: Any) -> dict[str, Any]:
    s = run.summary
    g = run.gpu or {}
    return {"policy": ev.label(run), "mean_bsld": s["mean_bsld"],
            "gpu_utilization": s["gpu_utilization"],
            "effective_gpu_utilization": g.get("effective_gpu_utilization"),
            "mean_wait_s": s["mean_wait_s"],
            "spread_penalty_gpu_hours": g.get("spread_penalty_gpu_hours")}


def util_bound(ev: Any, cluster: Any) -> float | None:
    """Mean over the test windows of :func:`hpcpolicy.sim.gpu_metrics.gpu_utilization_bound`
    (the windows' GPU utilisation is a mean too); None when a GPU type's speed is not 1 (a
    faster type could shorten jobs, so the figure would not bound the replays)."""
    import numpy as np

    from hpcpolicy.sim.gpu_metrics import gpu_utilization_bound

    if any(g.gpus and g.gpu_speed != 1.0 for g in cluster.groups):
        return None
    run = ev.runs[0]
    bounds = [gpu_utilization_bound(w.jobs, cluster, run.config) for w in run.windows]
    known = [b for b in bounds if b is not None]
    return float(np.mean(known)) if len(known) == len(bounds) else None


def topology(ev: Any) -> list[dict[str, Any]]:
    """Per baseline policy: first-available against topology-aware allocation."""
    by = {(r.config.policy, r.config.allocator): r.summary["mean_bsld"] for r in ev.runs}
    out = []
    for policy in ("fcfs", "lcfs", "sjf"):
        first, topo = by[(policy, "first-available")], by[(policy, "topology-aware")]
        out.append({"policy": policy, "first_available_bsld": first,
                    "topology_aware_bsld": topo, "topology_wins": topo < first})
    return out


def learned(ev: Any, spec: str) -> dict[str, Any]:
    """A trained policy against the best baselines on bounded slowdown and GPU utilisation."""
    run = next(r for r in ev.runs if r.config.policy == spec)
    (b_name, b_bsld), (u_name, u_util) = ev.best_heuristics()["none"], ev.best_heuristics(
        "gpu_utilization")["none"]
    bsld, util = run.summary["mean_bsld"], run.summary["gpu_utilization"]
    effective = {r.config.policy if r is run else ev.label(r):
                 (r.gpu or {}).get("effective_gpu_utilization") for r in ev.runs
                 if r is run or r.config.policy not in ev.learned}
    mine = effective.pop(run.config.policy)
    e_name, e_best = max(effective.items(), key=lambda kv: kv[1] or 0.0)
    return {"mean_bsld": bsld, "gpu_utilization": util, "effective_gpu_utilization": mine,
            "best_effective_util_baseline": e_name, "best_effective_util": e_best,
            "best_bsld_baseline": b_name, "best_bsld": b_bsld,
            "best_util_baseline": u_name, "best_util": u_util,
            "bsld_change": ev.versus_best(run), "util_change": ev.versus_best(
                run, "gpu_utilization"),
            "meets_bar": bsld < b_bsld and util > u_util}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", default="hpc2n-gpu,alibaba", help="comma-separated")
    parser.add_argument("--minutes", type=float, default=20.0,
                        help="training budget per workload and algorithm")
    parser.add_argument("--spread-penalty", type=float, default=0.2)
    parser.add_argument("--workers", type=int, default=2, help="DD-PPO workers (marl)")
    parser.add_argument("--train-window", type=int, default=512, help="jobs per episode")
    parser.add_argument("--k", type=int, default=32, help="jobs the selector sees (marl)")
    parser.add_argument("--visible", choices=("oldest", "fitting", "shortest", "extremes"),
                        default="oldest", help="which waiting jobs the selector sees (marl)")
    parser.add_argument("--config", type=Path, default=None,
                        help="JSON of marl config fields (gamma, gae_lambda, warm_start, ...)")
    parser.add_argument("--train-frac", type=float, default=TRAIN_FRAC)
    parser.add_argument("--windows", type=int, default=10)
    parser.add_argument("--window-size", type=int, default=1024)
    parser.add_argument("--seed", type=int, default=1,
                        help="seed of the test windows (and of training, unless --train-seed)")
    parser.add_argument("--train-seed", type=int, default=None,
                        help="seed of training (default: --seed)")
    parser.add_argument("--dqn", action="store_true", help="also the online GPU-type DQN")
    parser.add_argument("--no-train", action="store_true",
                        help="only the topology comparison (no training)")
    parser.add_argument("--cache", type=Path,
                        default=Path(tempfile.gettempdir()) / "hpcpolicy-bench" / "gpu")
    parser.add_argument("--runs", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=RESULTS / "gpu_quality.json")
    a = parser.parse_args(argv)

    from hpcpolicy.atomic import write_json

    runs_dir = a.runs or Path(tempfile.mkdtemp(prefix="hpcpolicy-gpu-"))
    results: list[dict[str, Any]] = []
    for name in a.workloads.split(","):
        build, options = WORKLOADS[name]
        table, spec = build(a.cache)
        spec = with_penalty(spec, a.spread_penalty, a.cache)
        trained: dict[str, dict[str, Any]] = {}
        for algo in ([] if a.no_train else ["marl", *(["dqn"] if a.dqn else [])]):
            run = runs_dir / f"{name}-{algo}"
            marl = ["--workers", str(a.workers), "--window-size", str(a.train_window),
                    "--k", str(a.k), "--visible", a.visible,
                    *(["--config", str(a.config)] if a.config else [])]
            wall = train_until(
                [str(table), "--algo", algo, "--cluster", str(spec), "--seed",
                 str(a.seed if a.train_seed is None else a.train_seed),
                 "--steps", "100000000", "--train-frac", str(a.train_frac), *options,
                 *(marl if algo == "marl" else []), "-o", str(run)],
                max(a.minutes * 60.0 - MARGIN_S, 30.0))
            trained[algo] = {"run": str(run), "train_wall_s": wall}
        policies = tuple(str(Path(t["run"]) / "policy") for t in trained.values())
        ev, machine = _evaluation(table, spec, policies, options, a)
        row: dict[str, Any] = {
            "workload": name, "table": str(table), "cluster": str(spec),
            "spread_penalty": a.spread_penalty, "windows": list(ev.starts),
            "window_size": a.window_size, "runs": [_row(ev, r) for r in ev.runs],
            "util_bound_no_slowdown": util_bound(ev, machine),
            "topology": topology(ev)}
        for algo, facts in trained.items():
            row[algo] = {**facts, **learned(ev, str(Path(facts["run"]) / "policy"))}
        results.append(row)
    write_json(a.out, {"command": " ".join(["python -m benchmarks.gpu_quality",
                                            *(argv or sys.argv[1:])]),
                       "results": results})
    parts = []
    for r in results:
        wins = sum(t["topology_wins"] for t in r["topology"])
        text = f"{r['workload']}: topology-aware beats first-available for {wins}/3 policies"
        if r["util_bound_no_slowdown"] is not None:
            text += f"; GPU util without slowed jobs <= {r['util_bound_no_slowdown']:.4f}"
        for algo in ("marl", "dqn"):
            if algo in r:
                m = r[algo]
                text += (f"; {algo} bsld {m['mean_bsld']:.2f} vs {m['best_bsld']:.2f} "
                         f"({m['best_bsld_baseline']}), GPU util {m['gpu_utilization']:.3f} vs "
                         f"{m['best_util']:.3f} ({m['best_util_baseline']})")
        parts.append(text)
    print("gpu quality: " + " | ".join(parts) + f" -> {a.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
