"""DD-PPO scaling on this machine: environment samples per second with 1 and with N workers.

Runs :func:`hpcpolicy.ppo.ddppo.launch` (same per-worker config, ``--updates`` updates each)
and reads ``metrics.csv``, on the real scheduling environment of a shared trace (``--trace``,
default lublin_256, episodes of 256 jobs as in training) or on the toy environment of
``benchmarks/builders/rl_toy_env.py`` (``--trace toy``; run from the repository root, so that
the workers import it too). The figure is the steady-state rate: samples of
updates 2..U divided by their wall time (rollout, learning, all-reduce, checkpoints; the first
update, with process start and warm-up, is left out). The end-to-end rate (including torchrun
start) is reported too. Before the timed runs, one untimed run of ``--warmup-updates`` updates
with the largest worker count fills numba's on-disk cache: on a fresh machine the first run
otherwise compiles the episode-end code in the middle of its third update (a stall of
seconds, seen as one ~100 samples/s update) and that repeat's ratio means nothing. Each
worker count runs once per repeat, the counts of a repeat back to back; the speed-up is the
median over repeats of each repeat's ratio to its 1-worker run, and the ratio of the best runs
is reported beside it.

With ``--side-by-side`` (on by default), each repeat also runs as many independent 1-worker
trainings at once as the largest worker count, each pinned to a CPU of its own, and sums their
rates: what this machine gives that many busy processes that never wait for one another. It
separates DD-PPO's own cost (waiting at the collectives) from the machine's (cores that slow
each other down). Writes JSON and prints one line.

Usage::

    python -m benchmarks.ddppo_scaling                  # 1 vs 2 workers, lublin_256, K = 128
    python -m benchmarks.ddppo_scaling --trace toy --workers 1,2,4 --updates 20
    python -m benchmarks.ddppo_scaling --sync-frac 0.5  # with DD-PPO's straggler cut-off
"""

from __future__ import annotations

import argparse
import csv
import functools
import itertools
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks._common import RESULTS, TRACES, ingest_trace

TARGET_SPEEDUP = 1.8


def _steady_rate(metrics: Path) -> float:
    """Samples per second over updates 2..U from a run's metrics.csv."""
    with metrics.open(newline="") as f:
        rows = [(float(r["global_step"]), float(r["wall_time_s"])) for r in csv.DictReader(f)]
    (step0, time0), (step1, time1) = rows[0], rows[-1]
    return (step1 - step0) / (time1 - time0)


def _side_by_side(cfg: Any, factory: str, env_kwargs: dict[str, Any],
                  runs: list[Path]) -> float:
    """Summed steady rate of independent 1-worker trainings in ``runs``, all at once, each
    pinned to one of the CPUs this process may use, in turn."""
    from hpcpolicy.ppo.ddppo import prepare_launch, torchrun_command

    cpus = sorted(os.sched_getaffinity(0))
    procs = []
    for run, cpu in zip(runs, itertools.cycle(cpus)):
        prepare_launch(cfg, factory, run, env_kwargs=env_kwargs)
        procs.append(subprocess.Popen(
            torchrun_command("hpcpolicy.ppo.ddppo", run, 1, False),
            env={**os.environ, "OMP_NUM_THREADS": "1"},
            preexec_fn=functools.partial(os.sched_setaffinity, 0, {cpu})))
    codes = [p.wait() for p in procs]
    if any(codes):
        raise RuntimeError(f"a side-by-side run failed (torchrun exit codes {codes})")
    return sum(_steady_rate(run / "metrics.csv") for run in runs)


def _environment(args: argparse.Namespace) -> tuple[str, dict[str, Any], str]:
    """(factory, its keyword arguments, a description) of the environment to train on."""
    if args.trace == "toy":
        # the workers import the toy environment from the repository root, their directory
        return ("benchmarks.builders.rl_toy_env:make_rank_toy_env",
                {"k": args.k, "episode_len": 256}, "benchmarks/builders/rl_toy_env.py ToyQueueEnv")
    from hpcpolicy.env.config import EnvConfig
    from hpcpolicy.env.factory import ENV_FACTORY, env_kwargs
    from hpcpolicy.workload import WorkloadOptions
    from hpcpolicy.world import WorldSpec

    table = ingest_trace(args.trace, args.cache)
    kwargs = env_kwargs(table, EnvConfig(k=args.k, window_size=256),
                        WorldSpec(workload=WorkloadOptions(**TRACES[args.trace].workload)))
    return ENV_FACTORY, kwargs, f"{args.trace} scheduling environment (256-job episodes)"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", default="1,2", help="worker counts, comma-separated")
    parser.add_argument("--updates", type=int, default=12, help="updates per run")
    parser.add_argument("--trace", default="lublin_256",
                        help="a trace of benchmarks._common.TRACES (its real environment) or toy")
    parser.add_argument("--k", type=int, default=128, help="slots per observation")
    parser.add_argument("--num-envs", type=int, default=8, help="environments per worker")
    parser.add_argument("--num-steps", type=int, default=256, help="rollout steps per env")
    parser.add_argument("--num-minibatches", type=int, default=8,
                        help="minibatches per epoch (one gradient all-reduce each)")
    parser.add_argument("--pin-cpus", action=argparse.BooleanOptionalAction, default=True,
                        help="DDPPOConfig.pin_cpus (one CPU per worker)")
    parser.add_argument("--sync-frac", type=float, default=1.0,
                        help="DDPPOConfig.sync_frac: the straggler cut-off (0.5 with 2 workers: "
                             "a worker stops collecting once the other is done; 1 = off)")
    parser.add_argument("--cache", type=Path,
                        default=Path(tempfile.gettempdir()) / "hpcpolicy-bench",
                        help="where the trace is ingested once")
    parser.add_argument("--seed", type=int, default=1, help="run seed")
    parser.add_argument("--repeats", type=int, default=5,
                        help="runs per worker count (the median ratio is reported)")
    parser.add_argument("--warmup-updates", type=int, default=4,
                        help="updates of the untimed warm-up run (0: none)")
    parser.add_argument("--side-by-side", action=argparse.BooleanOptionalAction, default=True,
                        help="also run independent 1-worker trainings at once, one per CPU, "
                             "as many as the largest worker count: the machine's ceiling")
    parser.add_argument("--out", type=Path, default=RESULTS / "ddppo_scaling.json",
                        help="where to write the JSON result")
    args = parser.parse_args(argv)

    from hpcpolicy.atomic import write_json
    from hpcpolicy.ppo.config import DDPPOConfig
    from hpcpolicy.ppo.ddppo import launch

    factory, env_kwargs, env_name = _environment(args)
    counts = [int(w) for w in args.workers.split(",")]
    rates: dict[int, list[float]] = {w: [] for w in counts}
    end_to_end: dict[int, list[float]] = {w: [] for w in counts}
    side_by_side = max(counts) if args.side_by_side and hasattr(os, "sched_setaffinity") else 0
    ceiling: list[float] = []

    def config(workers: int, updates: int) -> DDPPOConfig:
        return DDPPOConfig(
            total_steps=workers * args.num_envs * args.num_steps * updates,
            num_envs=args.num_envs, num_steps=args.num_steps,
            num_minibatches=args.num_minibatches, seed=args.seed,
            pin_cpus=args.pin_cpus, sync_frac=args.sync_frac)

    with tempfile.TemporaryDirectory() as tmp:
        if args.warmup_updates > 0:
            launch(config(max(counts), args.warmup_updates), factory, Path(tmp) / "warmup",
                   workers=max(counts), env_kwargs=env_kwargs)
        for repeat in range(args.repeats):  # interleaved, so that load changes hit all counts
            for workers in counts:
                cfg = config(workers, args.updates)
                run = Path(tmp) / f"w{workers}r{repeat}"
                start = time.perf_counter()
                result = launch(cfg, factory, run, workers=workers, env_kwargs=env_kwargs)
                end_to_end[workers].append(result.global_step / (time.perf_counter() - start))
                rates[workers].append(_steady_rate(run / "metrics.csv"))
            if side_by_side > 1:
                lone = DDPPOConfig(total_steps=args.num_envs * args.num_steps * args.updates,
                                   num_envs=args.num_envs, num_steps=args.num_steps,
                                   num_minibatches=args.num_minibatches, seed=args.seed)
                ceiling.append(_side_by_side(lone, factory, env_kwargs, [
                    Path(tmp) / f"side{i}r{repeat}" for i in range(side_by_side)]))
    base = rates[counts[0]]
    # A repeat's counts ran back to back, so their ratio sees the same conditions; the
    # median over repeats is the headline (best over best rewards one lucky run).
    runs = {str(w): {"steady_samples_per_s_best": max(rates[w]),
                     "steady_samples_per_s_median": statistics.median(rates[w]),
                     "steady_samples_per_s_all": rates[w],
                     "end_to_end_samples_per_s_best": max(end_to_end[w]),
                     "speedup": statistics.median(r / b for r, b in zip(rates[w], base,
                                                                           strict=True)),
                     "speedup_best_over_best": max(rates[w]) / max(base)} for w in counts}
    if ceiling:
        top = rates[side_by_side]
        runs[f"{side_by_side}_independent_side_by_side"] = {
            "summed_steady_samples_per_s_all": ceiling,
            "summed_steady_samples_per_s_median": statistics.median(ceiling),
            "speedup": statistics.median(c / b for c, b in zip(ceiling, base, strict=True)),
            f"ddppo_{side_by_side}_workers_share": statistics.median(
                r / c for r, c in zip(top, ceiling, strict=True))}
    out = {
        "benchmark": "ddppo_scaling", "env": env_name,
        "k": args.k, "num_envs": args.num_envs, "num_steps": args.num_steps,
        "num_minibatches": args.num_minibatches, "update_epochs": cfg.update_epochs,
        "updates": args.updates, "warmup_updates": args.warmup_updates,
        "repeats": args.repeats, "torch_threads_per_worker": 1,
        "pin_cpus": args.pin_cpus, "sync_frac": args.sync_frac,
        "checkpoint_every": cfg.checkpoint_every,
        "backend": "gloo",
        "target_speedup_2_workers": TARGET_SPEEDUP, "runs": runs,
        "conditions": {"cpu_count": os.cpu_count(), "loadavg_1m_after": os.getloadavg()[0]},
    }
    write_json(args.out, out)
    parts = ", ".join(f"{w} worker(s) {runs[str(w)]['steady_samples_per_s_median']:.0f}/s "
                      f"(x{runs[str(w)]['speedup']:.2f}, "
                      f"best x{runs[str(w)]['speedup_best_over_best']:.2f})" for w in counts)
    if ceiling:
        side = runs[f"{side_by_side}_independent_side_by_side"]
        parts += (f"; {side_by_side} independent 1-worker runs side by side x{side['speedup']:.2f}"
                  f" (DD-PPO reaches {side[f'ddppo_{side_by_side}_workers_share']:.0%} of it)")
    print(f"ddppo scaling, {args.trace} env K={args.k}: {parts}; target x{TARGET_SPEEDUP} at 2 "
          f"[{os.cpu_count()} cpus, load {out['conditions']['loadavg_1m_after']:.2f}] "
          f"-> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
