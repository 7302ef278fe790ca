"""Benchmark the scheduling environment: decisions per second per core with a trivial policy.

What is measured, per case (trace x backfilling, K = 128 slots, windows of ``--window-size``
jobs from the training part): ``env.step`` driven by a trivial policy (``first``: always slot
0, the oldest waiting job, i.e. FCFS; or ``random``: a uniformly drawn valid slot), including
every episode's ``reset`` and end-of-episode metrics, over ``--seconds`` of CPU time after one
warm-up episode (JIT compilation is not counted). Reported:

* ``decisions_per_cpu_s``: decisions / CPU seconds of this process (``time.process_time``):
  the per-core figure the issue asks for (>= 20,000), robust to other load on the machine;
* ``decisions_per_wall_s``: the same over wall time (lower when the machine is shared);
* with and without the end-of-episode baselines (FCFS, SJF, F1 replayed on each finished
  window to report "bsld vs best heuristic"), and through the trainer's vector of 8
  environments (:class:`hpcpolicy.ppo.vector.SyncEnvs`) as well as one environment alone;
* with ``--prior NAME``, also the environment alone with a prior heuristic
  (:mod:`hpcpolicy.env.prior`: its best ``k`` waiting jobs in the slots, scored and sorted at
  every decision), and its rate over the rate without one, measured in the same process.

Traces are ingested once into ``--cache`` (outside the repository). Writes JSON (default
``benchmarks/results/env.json``) and prints one line.

Usage:
    python -m benchmarks.env [--seconds 5] [--window-size 1024] [--policy first|random]
        [--prior f3]
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks._common import RESULTS, TRACES, ingest_trace

STUDIED = ("lublin_256", "HPC2N")
"""The traces measured by default."""
TARGET = 20_000
"""Decisions per second per core the issue asks for."""


def _policy(kind: str, rng: np.random.Generator) -> Any:
    if kind == "first":
        return lambda mask: 0
    return lambda mask: int(rng.choice(np.flatnonzero(mask)))


def _time_env(make: Any, seconds: float, policy: str, seed: int) -> dict[str, Any]:
    """One environment stepped for ``seconds`` of CPU time after a warm-up episode."""
    env = make()
    choose = _policy(policy, np.random.default_rng(seed))
    _, info = env.reset(seed=seed)
    done = False
    while not done:  # warm-up: JIT compilation, caches
        _, _, done, _, info = env.step(choose(info["action_mask"]))
    _, info = env.reset()
    decisions = episodes = 0
    cpu0, wall0 = time.process_time(), time.perf_counter()
    while time.process_time() - cpu0 < seconds:
        for _ in range(256):
            _, _, done, _, info = env.step(choose(info["action_mask"]))
            decisions += 1
            if done:
                episodes += 1
                _, info = env.reset()
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    return {"decisions": decisions, "episodes": episodes, "cpu_s": cpu, "wall_s": wall,
            "decisions_per_cpu_s": decisions / cpu, "decisions_per_wall_s": decisions / wall}


def _time_vector(make: Any, seconds: float, num_envs: int, seed: int) -> dict[str, Any]:
    """The trainer's vector of environments, every environment on its slot 0."""
    from hpcpolicy.ppo.vector import SyncEnvs

    envs = SyncEnvs(make, num_envs, seed)
    envs.reset()
    zeros = np.zeros(num_envs, dtype=np.int64)
    for _ in range(512):  # warm-up
        envs.step(zeros)
    decisions = 0
    cpu0, wall0 = time.process_time(), time.perf_counter()
    while time.process_time() - cpu0 < seconds:
        for _ in range(64):
            envs.step(zeros)
            decisions += num_envs
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    return {"num_envs": num_envs, "decisions": decisions, "cpu_s": cpu, "wall_s": wall,
            "decisions_per_cpu_s": decisions / cpu, "decisions_per_wall_s": decisions / wall}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="CPU seconds per case")
    parser.add_argument("--window-size", type=int, default=1024, help="jobs per episode")
    parser.add_argument("--k", type=int, default=128, help="slots per observation")
    parser.add_argument("--policy", choices=("first", "random"), default="first",
                        help="trivial policy: always slot 0, or a random valid slot")
    parser.add_argument("--traces", default=",".join(STUDIED), help="comma-separated")
    parser.add_argument("--backfills", default="none,easy", help="comma-separated")
    parser.add_argument("--seed", type=int, default=1, help="seed of episodes and policy")
    parser.add_argument("--prior", default=None,
                        help="also time the environment with this prior heuristic")
    parser.add_argument("--cache", type=Path,
                        default=Path(tempfile.gettempdir()) / "hpcpolicy-bench")
    parser.add_argument("--out", type=Path, default=RESULTS / "env.json")
    args = parser.parse_args(argv)

    import functools

    from hpcpolicy.atomic import write_json
    from hpcpolicy.env import EnvConfig
    from hpcpolicy.env.factory import env_kwargs, make_env
    from hpcpolicy.workload import WorkloadOptions
    from hpcpolicy.world import WorldSpec

    cases = []
    for trace in args.traces.split(","):
        table = ingest_trace(trace, args.cache)
        options = WorkloadOptions(**TRACES[trace].workload)
        for backfill in args.backfills.split(","):
            row: dict[str, Any] = {"trace": trace, "backfill": backfill}
            for label, baselines in (("no_baselines", ()), ("baselines", ("fcfs", "sjf", "f1"))):
                cfg = EnvConfig(k=args.k, window_size=args.window_size, backfill=backfill,
                                baselines=baselines)
                make = functools.partial(make_env, **env_kwargs(
                    table, cfg, WorldSpec(workload=options)))
                row[label] = _time_env(make, args.seconds, args.policy, args.seed)
                if label == "baselines":
                    row["vector_8_envs"] = _time_vector(make, args.seconds, 8, args.seed)
            if args.prior is not None:
                cfg = EnvConfig(k=args.k, window_size=args.window_size, backfill=backfill,
                                prior=args.prior)
                make = functools.partial(make_env, **env_kwargs(
                    table, cfg, WorldSpec(workload=options)))
                row["prior"] = _time_env(make, args.seconds, args.policy, args.seed)
                row["prior"]["over_no_prior"] = (row["prior"]["decisions_per_cpu_s"]
                                                 / row["no_baselines"]["decisions_per_cpu_s"])
            cases.append(row)
    worst = min(c["no_baselines"]["decisions_per_cpu_s"] for c in cases)
    out = {
        "benchmark": "env", "k": args.k, "window_size": args.window_size,
        "policy": args.policy, "prior": args.prior, "seconds_per_case": args.seconds,
        "target_per_core": TARGET,
        "meets_target": worst >= TARGET, "cases": cases,
        "conditions": {"cpu": platform.processor() or platform.machine(),
                       "cpu_count": os.cpu_count(), "loadavg_1m": os.getloadavg()[0],
                       "python": sys.version.split()[0], "numpy": np.__version__},
    }
    write_json(args.out, out)
    parts = "; ".join(
        f"{c['trace']} {c['backfill']} {c['no_baselines']['decisions_per_cpu_s']:,.0f} "
        f"({c['baselines']['decisions_per_cpu_s']:,.0f} with baselines, "
        f"{c['vector_8_envs']['decisions_per_cpu_s']:,.0f} in 8 envs"
        + (f", {c['prior']['decisions_per_cpu_s']:,.0f} with prior {args.prior}, "
           f"x{c['prior']['over_no_prior']:.2f}" if "prior" in c else "") + ")" for c in cases)
    print(f"env decisions per CPU-second, K={args.k}, {args.window_size}-job windows, "
          f"policy {args.policy}: {parts}; target {TARGET:,} -> "
          f"{'met' if out['meets_target'] else 'NOT met'} "
          f"[load {out['conditions']['loadavg_1m']:.1f}] -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
