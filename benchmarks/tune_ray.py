"""Population-based training on Ray against the serial loop: wall time and final validation
score of one tune run twice, ``--backend local`` and ``--backend ray`` (a Ray started here).

Both runs get the same command (population, steps, interval, seed) on the same synthetic log
(``hpcpolicy generate``, the Lublin model on 256 processors, ``--jobs`` jobs, ingested once;
planned with the real run times, since the model has no requests).
Each backend gets the whole machine: the serial loop trains one member at a time with torch
on every core (``OMP_NUM_THREADS`` = the cores); each Ray member has one torch thread and
``--member-cpus`` of Ray's cores: with 1, as many members train at once as there are cores
(the others wait their turn, each round); with 0.5 on 2 cores, all four at once. The wall
time is the command's, from start to exit, Ray's start-up included. The bar: Ray's wall
time at most 0.6x the serial one, with a best validation mean bsld no worse within noise.

``--cluster-test`` also runs the Ray and sweep tests, slow ones included: the tune and sweep
on a two-node Ray cluster with a killed trial (tests/test_ray.py) and the 2 x 2 x 2 sweep
against eight ``whatif`` runs (tests/test_sweep.py), and records whether they passed.

Writes JSON and prints one line.

Usage::

    python -m benchmarks.tune_ray                       # population 4, 4 rounds
    python -m benchmarks.tune_ray --steps 4096 --interval 1024 --cluster-test
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks._common import RESULTS, ROOT
from benchmarks.cli import hpcpolicy_cli

TARGET_RATIO = 0.6


def _run(cmd: list[str], env: dict[str, str] | None = None) -> float:
    """Run ``cmd``; its wall time in seconds (a failure ends the benchmark with its output)."""
    start = time.perf_counter()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{done.stdout}\n{done.stderr}")
    return time.perf_counter() - start


def _tune(table: Path, out: Path, args: argparse.Namespace, member_cpus: float | None
          ) -> dict[str, Any]:
    """One tune, serial (``member_cpus`` None) or on Ray: its wall time and tune.json's
    figures."""
    cores = os.cpu_count() or 1
    backend = "local" if member_cpus is None else "ray"
    env = {**os.environ, "OMP_NUM_THREADS": str(cores if member_cpus is None else 1)}
    cmd = [*hpcpolicy_cli(), "-q", "tune", str(table), "--population", str(args.population),
           "--steps", str(args.steps), "--interval", str(args.interval), "--seed",
           str(args.seed), "--window-size", str(args.window_size), "--val-window-size",
           str(args.window_size), "--walltime-fallback", "runtime", "-o", str(out),
           "--backend", backend]
    wall = _run(cmd + ([] if member_cpus is None else ["--member-cpus", str(member_cpus)]), env)
    record = json.loads((out / "tune.json").read_text())
    last = record["rounds"][-1]["scores"]
    return {"wall_s": wall, "tune_wall_time_s": record["wall_time_s"],
            "best_val_bsld": record["best"]["val_bsld"], "best_member": record["best"]["member"],
            "last_round_scores": last, "baselines": record["baselines"]}


def _slow_tests() -> dict[str, Any]:
    """The slow multi-process tests, with their outcome and duration."""
    out = {}
    for test in ("tests/test_ray.py", "tests/test_sweep.py"):
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-m", "slow or not slow",
                               test],
                              cwd=ROOT, capture_output=True, text=True)
        out[test] = {"passed": done.returncode == 0, "s": time.perf_counter() - start,
                     "tail": done.stdout.strip().splitlines()[-1:]}
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--population", type=int, default=4)
    parser.add_argument("--steps", type=int, default=131072, help="Steps of each member.")
    parser.add_argument("--interval", type=int, default=32768)
    parser.add_argument("--member-cpus", default="1,0.5",
                        help="Ray runs to make: the --member-cpus of each (comma-separated).")
    parser.add_argument("--jobs", type=int, default=6000, help="Jobs of the synthetic log.")
    parser.add_argument("--window-size", type=int, default=256)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--cluster-test", action="store_true",
                        help="Also run the slow multi-process tests (about 3 minutes).")
    parser.add_argument("--out", type=Path, default=RESULTS / "tune_ray.json")
    args = parser.parse_args(argv)
    from hpcpolicy.atomic import write_json

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        _run([*hpcpolicy_cli(), "-q", "generate", "--jobs", str(args.jobs), "--procs", "256",
              "--seed", str(args.seed), "-o", str(folder / "log.swf")])
        _run([*hpcpolicy_cli(), "-q", "ingest", str(folder / "log.swf"), "-o",
              str(folder / "jobs.parquet")])
        runs = {"local": _tune(folder / "jobs.parquet", folder / "local", args, None)}
        for cpus in (float(c) for c in args.member_cpus.split(",")):
            runs[f"ray@{cpus:g}"] = _tune(folder / "jobs.parquet", folder / f"ray{cpus:g}",
                                         args, cpus)
    ratios = {name: run["wall_s"] / runs["local"]["wall_s"] for name, run in runs.items()
              if name != "local"}
    out: dict[str, Any] = {
        "config": vars(args) | {"out": str(args.out)}, "cores": os.cpu_count(),
        "load_average": os.getloadavg(), "runs": runs, "wall_ratio": ratios,
        "target_ratio": TARGET_RATIO,
        "meets_target": {name: ratio <= TARGET_RATIO for name, ratio in ratios.items()}}
    if args.cluster_test:
        out["slow_tests"] = _slow_tests()
    write_json(args.out, out)
    tests = "" if not args.cluster_test else "; slow tests " + ", ".join(
        f"{Path(t).stem} {'passed' if r['passed'] else 'FAILED'} ({r['s']:.0f} s)"
        for t, r in out["slow_tests"].items())
    parts = ", ".join(f"{name} {run['wall_s']:.1f} s (best val bsld {run['best_val_bsld']:.2f}"
                      + ("" if name == "local" else f", ratio {ratios[name]:.2f}") + ")"
                      for name, run in runs.items())
    print(f"tune population {args.population} x {args.steps} steps: {parts}; target ratio <= "
          f"{TARGET_RATIO}{tests}")


if __name__ == "__main__":
    main()
