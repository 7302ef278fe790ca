"""The policy on a real Slurm: one scaled trace window run on the test Slurm as Slurm
schedules it (priority/basic = FIFO, plus backfill), then once under ``hpcpolicy advise
--apply --watch 1 --policy P`` for each candidate P; mean bounded slowdown and wait from each
run's sacct, beside what the simulator (the what-if's replay: FCFS+EASY vs P+EASY on the
baseline run's log) predicted. Also how the default replay reproduces the real start times of
the baseline run (fidelity).

    python -m benchmarks.slurm_policy --jobs 60 [--policy sjf] [--train-steps 60000] \
        [--pairs 2] [--json out.json]

``--train-steps N`` adds a trained candidate: PPO (EASY) trained for N steps on the same
trace's jobs before the window, scaled as the window is (``--train-jobs`` of them), as an admin
trains on their own past log. ``--pairs K`` repeats the baseline and every candidate K times
(real start times move from run to run). Runs on the Slurm that SLURM_CONF names (the test
Slurm: ``tests/slurm/up.sh``, which needs root and Debian's slurm packages, prints the line to
export); takes minutes (every run executes in real time). One partition
(``batch``, all 4 nodes of 16 cores), so the replay's single pool of 64 cores is the same
machine.
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks._common import DATA, TRACES, slurm_env
from benchmarks.cli import hpcpolicy_cli
from hpcpolicy import train
from hpcpolicy.cluster import ClusterSpec
from hpcpolicy.deploy.guard import active_guard
from hpcpolicy.deploy.resolve import resolve_policy
from hpcpolicy.ingest import IngestConfig, ingest
from hpcpolicy.sim.engine import simulate
from hpcpolicy.sim.metrics import outcome_table, summarize
from hpcpolicy.sim.types import SimConfig, SimResult
from hpcpolicy.site.measure import fidelity
from hpcpolicy.slurm.submit import (
    Plan,
    ScaleConfig,
    export_sacct,
    scale_window,
    submit_plan,
    wait_finished,
)
from hpcpolicy.training.options import TrainOptions
from hpcpolicy.workload import Workload
from hpcpolicy.world.open import open_workload

CLUSTER = ClusterSpec.homogeneous(64, 4)
TRACE = DATA / TRACES["KTH-SP2"].file


def _run(env: dict[str, str], plan: Plan, work: Path, policy: str | None) -> Workload:
    watcher = None
    if policy is not None:
        watcher = subprocess.Popen(
            [*hpcpolicy_cli(), "-q", "advise", "--policy", policy,
             "--partition", "batch", "--apply", "--watch", "1", "--audit",
             str(work / "advise.jsonl")], env=env, stdout=subprocess.DEVNULL,
            # a shell's background job ignores SIGINT, and a child keeps that: Ctrl-C it is
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        time.sleep(2)
    try:
        ids = submit_plan(plan, work / "out", env)
        wait_finished(ids.values(), env, timeout_s=3600)
    finally:
        if watcher is not None:
            watcher.send_signal(signal.SIGINT)
            watcher.wait(timeout=60)
    sacct = export_sacct(ids.values(), work / "sacct.txt", env)
    ingest([sacct], work / "jobs.parquet", IngestConfig(overwrite=True))
    return open_workload(work / "jobs.parquet")


def _logged(w: Workload) -> dict[str, Any]:
    """Mean wait and bsld of the jobs as they really ran (the metrics module's definitions)."""
    start = w.logged_start
    result = SimResult(start=start, end=start + w.run_time, never_fits=np.zeros(len(w), bool),
                       killed=np.zeros(len(w), bool))
    return summarize(outcome_table(w, result), CLUSTER)


def _replay(w: Workload, policy: str) -> tuple[dict[str, Any], Any]:
    result = simulate(w, CLUSTER, SimConfig(policy="fcfs", backfill="easy"),
                      policy=resolve_policy(policy))
    table = outcome_table(w, result)
    return summarize(table, CLUSTER), table


def _swf(plan: Plan, path: Path) -> Path:
    """The scaled jobs of ``plan`` as an SWF trace (no logged starts: a training log)."""
    rows = [f"{i + 1} {round(j.submit_s)} -1 {j.run_s} {j.cpus} -1 -1 {j.cpus} "
            f"{j.limit_min * 60} -1 1 {1 + i % 7} 1 -1 1 -1 -1 -1"
            for i, j in enumerate(plan.jobs)]
    path.write_text(f"; MaxProcs: {CLUSTER.total_cores}\n" + "\n".join(rows) + "\n")
    return path


def _trained(whole: Workload, args: argparse.Namespace, scale: ScaleConfig, tmp: Path) -> str:
    """PPO (EASY) trained on the scaled jobs just before the window; its policy folder."""
    lo = max(0, args.first - args.train_jobs)
    swf = _swf(scale_window(whole.take(range(lo, args.first)), scale), tmp / "train.swf")
    ingest([swf], tmp / "train.parquet", IngestConfig(overwrite=True))
    opts = TrainOptions(steps=args.train_steps, backfill="easy", seed=args.seed)
    # the policy folder `hpcpolicy train` leaves: the snapshot deployed, the card, its guard
    return str(train(tmp / "train.parquet", algo="ppo", out=tmp / "train", options=opts).policy)


def _scale(whole: Workload, window: Workload, arrivals_s: float) -> ScaleConfig:
    span = int(window.submit[-1] - window.submit[0]) or 1
    return ScaleConfig(time_factor=0.01, min_run_s=5, max_run_s=60,
                       arrival_factor=arrivals_s / span, trace_procs=int(whole.procs.max()),
                       partitions=("batch",))


def _baseline_figures(w: Workload, candidates: dict[str, str]) -> dict[str, Any]:
    """What the what-if predicts from the baseline log, and how the default replay fits it."""
    base, table = _replay(w, "fcfs")
    predicted = {"fcfs_easy": {"mean_wait_s": base["mean_wait_s"], "mean_bsld": base["mean_bsld"]}}
    for label, policy in candidates.items():
        cand, _ = _replay(w, policy)
        predicted[label] = {"mean_wait_s": cand["mean_wait_s"], "mean_bsld": cand["mean_bsld"]}
    fid = fidelity(table, w.origin, "fcfs+easy")
    starts = (table["start"] - table["logged_start"]).abs()
    return {"whatif_predicted": predicted, "default_replay_fidelity": {
        "median_abs_start_error_s": float(starts.median()),
        "spearman_waits": fid["spearman"], "mean_wait_logged_s": fid["logged_mean_wait_s"],
        "mean_wait_replay_s": fid["simulated_mean_wait_s"]}}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--jobs", type=int, default=60)
    ap.add_argument("--first", type=int, default=5000, help="first job of the trace window")
    ap.add_argument("--arrivals-s", type=float, default=60.0,
                    help="the window's submissions are spread over this many seconds")
    ap.add_argument("--policy", action="append", help="a candidate (repeatable; default sjf)")
    ap.add_argument("--train-steps", type=int, default=0,
                    help="also train a PPO candidate for this many steps (0: none)")
    ap.add_argument("--trained", help="a trained candidate's policy folder (instead of training)")
    ap.add_argument("--train-jobs", type=int, default=4000,
                    help="trace jobs before the window that the trained candidate learns from")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--pairs", type=int, default=1, help="repeat every run this many times")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    env = slurm_env()
    tmp = Path(tempfile.mkdtemp(prefix="slurm-policy-"))
    ingest([TRACE], tmp / "trace.parquet", IngestConfig(overwrite=True))
    whole = open_workload(tmp / "trace.parquet")
    window = whole.take(range(args.first, args.first + args.jobs))
    scale = _scale(whole, window, args.arrivals_s)
    plan = scale_window(window, scale)
    candidates = {f"advise_{p}": p for p in args.policy or ["sjf"]}
    out: dict[str, Any] = {"jobs": args.jobs, "first": args.first, "trace": TRACE.name,
                           "runs": []}
    if args.train_steps or args.trained:
        tic = time.monotonic()
        candidates["advise_trained"] = args.trained or _trained(whole, args, scale, tmp)
        out["trained"] = {"policy": candidates["advise_trained"], "steps": args.train_steps,
                          "train_jobs": args.train_jobs, "wall_s": time.monotonic() - tic,
                          "guard_fallback": active_guard(candidates["advise_trained"])}
    for pair in range(args.pairs):
        for label, policy in {"slurm_fifo_backfill": None, **candidates}.items():
            work = tmp / f"{label}-{pair}"
            work.mkdir()
            tic = time.monotonic()
            w = _run(env, plan, work, policy)
            real = _logged(w)
            out["runs"].append({"pair": pair, "run": label, "mean_wait_s": real["mean_wait_s"],
                                "mean_bsld": real["mean_bsld"], "wall_s": time.monotonic() - tic,
                                "dir": str(work)})
            if policy is None and pair == 0:
                out.update(_baseline_figures(w, candidates))
            r = out["runs"][-1]
            print(f"pair {pair} {label}: bsld {r['mean_bsld']:.2f}, wait "
                  f"{r['mean_wait_s']:.1f} s", flush=True)
    if args.json:
        args.json.write_text(json.dumps(out, indent=2) + "\n")
    p = out["whatif_predicted"]
    print("what-if predicted: " + ", ".join(f"{k} bsld {v['mean_bsld']:.2f} wait "
                                            f"{v['mean_wait_s']:.1f} s" for k, v in p.items()))
    print(json.dumps(out["default_replay_fidelity"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
