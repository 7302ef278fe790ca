"""DD-PPO scaling on this machine: environment samples per second with 1 and with N workers.

Runs :func:`hpcpolicy.rl.ddppo.launch` on the toy environment of ``tests/rl_toy_env.py``
(same per-worker config, ``--updates`` updates each) and reads ``metrics.csv``. The figure is
the steady-state rate: samples of updates 2..U divided by their wall time (rollout, learning,
all-reduce; the first update, with process start and warm-up, is left out). The end-to-end rate
(including torchrun start) is reported too. Each worker count runs ``--repeats`` times,
interleaved; the best run counts (on a shared machine the best is the least disturbed). The
real figure must be taken again on the real scheduling environment, whose steps cost more
than the toy's. Writes JSON and prints one line.

Usage::

    python benchmarks/ddppo_scaling.py                  # 1 vs 2 workers, K = 128
    python benchmarks/ddppo_scaling.py --workers 1,2,4 --updates 20
"""

from __future__ import annotations

import argparse
import csv
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET_SPEEDUP = 1.8


def _steady_rate(metrics: Path) -> float:
    """Samples per second over updates 2..U from a run's metrics.csv."""
    with metrics.open(newline="") as f:
        rows = [(float(r["global_step"]), float(r["wall_time_s"])) for r in csv.DictReader(f)]
    (step0, time0), (step1, time1) = rows[0], rows[-1]
    return (step1 - step0) / (time1 - time0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", default="1,2", help="worker counts, comma-separated")
    parser.add_argument("--updates", type=int, default=12, help="updates per run")
    parser.add_argument("--k", type=int, default=128, help="slots per observation")
    parser.add_argument("--num-envs", type=int, default=8, help="environments per worker")
    parser.add_argument("--num-steps", type=int, default=64, help="rollout steps per env")
    parser.add_argument("--seed", type=int, default=1, help="run seed")
    parser.add_argument("--repeats", type=int, default=3,
                        help="runs per worker count; the best is reported (shared machines)")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/ddppo_scaling.json",
                        help="where to write the JSON result")
    args = parser.parse_args(argv)

    from hpcpolicy.atomic import write_json
    from hpcpolicy.rl.config import DDPPOConfig
    from hpcpolicy.rl.ddppo import launch

    # the toy environment lives in tests/: importable here (launch checks it) and in workers
    sys.path.insert(0, str(ROOT / "tests"))
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(ROOT / "tests"), os.environ.get("PYTHONPATH")) if p)
    counts = [int(w) for w in args.workers.split(",")]
    rates: dict[int, list[float]] = {w: [] for w in counts}
    end_to_end: dict[int, list[float]] = {w: [] for w in counts}
    with tempfile.TemporaryDirectory() as tmp:
        for repeat in range(args.repeats):  # interleaved, so that load changes hit all counts
            for workers in counts:
                cfg = DDPPOConfig(
                    total_steps=workers * args.num_envs * args.num_steps * args.updates,
                    num_envs=args.num_envs, num_steps=args.num_steps,
                    checkpoint_every=args.updates, seed=args.seed)
                run = Path(tmp) / f"w{workers}r{repeat}"
                start = time.perf_counter()
                result = launch(cfg, "rl_toy_env:make_rank_toy_env", run, workers=workers,
                                env_kwargs={"k": args.k, "episode_len": 256})
                end_to_end[workers].append(result.global_step / (time.perf_counter() - start))
                rates[workers].append(_steady_rate(run / "metrics.csv"))
    base = max(rates[counts[0]])
    runs = {str(w): {"steady_samples_per_s_best": max(rates[w]),
                     "steady_samples_per_s_median": statistics.median(rates[w]),
                     "steady_samples_per_s_all": rates[w],
                     "end_to_end_samples_per_s_best": max(end_to_end[w]),
                     "speedup": max(rates[w]) / base} for w in counts}
    out = {
        "benchmark": "ddppo_scaling", "env": "tests/rl_toy_env.py ToyQueueEnv",
        "k": args.k, "num_envs": args.num_envs, "num_steps": args.num_steps,
        "updates": args.updates, "repeats": args.repeats, "torch_threads_per_worker": 1,
        "backend": "gloo",
        "target_speedup_2_workers": TARGET_SPEEDUP, "runs": runs,
        "conditions": {"cpu_count": os.cpu_count(), "loadavg_1m_after": os.getloadavg()[0]},
    }
    write_json(args.out, out)
    parts = ", ".join(f"{w} worker(s) {r['steady_samples_per_s_best']:.0f}/s "
                      f"(x{r['speedup']:.2f})" for w, r in runs.items())
    print(f"ddppo scaling, toy env K={args.k}: {parts}; target x{TARGET_SPEEDUP} at 2 "
          f"[{os.cpu_count()} cpus, load {out['conditions']['loadavg_1m_after']:.2f}] "
          f"-> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
