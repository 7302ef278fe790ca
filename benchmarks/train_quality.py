"""The learning bar: a DD-PPO policy against the best heuristic on a later period of the trace.

Protocol (issue 4), per trace (lublin_256 and HPC2N from ../shared/data) and per backfilling
mode (none and EASY):

1. train with ``hpcpolicy.train(..., algo="ddppo")`` on the earliest ``--train-frac`` (70 %) of the
   jobs, episodes of ``--train-window`` consecutive jobs;
2. evaluate with :func:`hpcpolicy.evaluate.evaluate` on ``--windows`` (>= 10) windows of
   ``--window-size`` (1,024) jobs drawn from the later 30 %, against FCFS, SJF, F1, WFP3 and
   UNICEP with the same backfilling, all on identical windows (cold starts, as RLScheduler);
3. the bar: the policy's mean bounded slowdown is at least 10 % below the best heuristic's.

Budget: ``--minutes`` of training per trace (default 30, the issue's limit on a 2-core
machine), shared equally by the backfilling modes. Each run first measures its own steady
steps/s in a short calibration run (its time counts against the budget), sets ``--steps`` so
that training fits the rest, and is stopped like a Ctrl-C (the trainer checkpoints and exports
its policy) if it still overruns. ``--steps N`` instead gives a fixed budget per policy.
The wall time of every run is reported.

``--rlscheduler`` adds RLScheduler's own protocol on lublin_256: their conventions
(``--compat rlscheduler``: processors, perfect estimates, their backfilling and machine
model), training on the whole trace as they do, evaluation on their ten fixed windows, so
that the policy can be set beside their published average bounded slowdowns (with their
backfilling: RL 58.64, SJF 73.31, F1 75.07; without: SJF 277.35, F1 258.37).

Writes JSON (default ``benchmarks/results/train_quality.json``) and prints one line. Run on an
idle machine: training throughput, hence quality within a time budget, depends on it.

``--warm-start f1`` first clones F1's decisions on the training windows (``hpcpolicy dataset
build --source heuristics``, then ``--algo bc``) and starts DD-PPO from that policy
(``--init-from``); ``--reward`` sets the training reward (the bar stays on bounded slowdown).

Each run is :func:`hpcpolicy.train`, so each policy is the one ``hpcpolicy train`` deploys:
the best of the final policy and the run's snapshots on the validation part (the last 10 % of
the training part, which no episode used; the test windows play no part in the choice), with
its model card and guard. ``--snapshot-every N`` sets how often a run keeps a snapshot (PPO's
``snapshot_every``; default about five per run); the selection's time counts against the
budget too. ``--restarts N`` trains N policies one after another (seeds SEED, SEED + 1, ...;
one warm start and one calibration for all), each with 1/N of the budget, and deploys the one
whose deployed policy scores best on the same validation windows: a seed whose training goes
astray is then outscored there instead of deployed.

Usage:
    python -m benchmarks.train_quality                       # the bar, 30 min per trace
    python -m benchmarks.train_quality --steps 4096 --windows 2 --window-size 256   # a try
    python -m benchmarks.train_quality --warm-start f1 --reward bsld:1,utilization:50 \
        --config gamma1.json --snapshot-every 100     # the recipe of RESULTS.md
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from benchmarks._common import RESULTS, TRACES, TRAIN_FRAC, ingest_trace
from benchmarks.cli import hpcpolicy_cli
from hpcpolicy.env.spaces import DEFAULT_K  # what `hpcpolicy train` shows
from hpcpolicy.training import Trained, TrainOptions, train

HEURISTICS = ("fcfs", "sjf", "f1", "wfp3", "unicep")
BAR = -0.10
"""Required change of mean bounded slowdown against the best heuristic (10 % lower)."""
RLSCHEDULER_OPTIONS: dict[str, Any] = {"compat": "rlscheduler", "split": "all"}
"""RLScheduler's protocol: their conventions, training on the whole trace."""
RLSCHEDULER_STARTS = (1981, 2714, 2756, 3316, 4022, 4299, 5228, 7085, 7762, 8850)
RLSCHEDULER_PUBLISHED = {"easy": {"rl": 58.64, "sjf": 73.31, "f1": 75.07},
                         "none": {"sjf": 277.35, "f1": 258.37}}
MARGIN_S = 10.0
"""Seconds kept free at the end of a time budget: a stopped run still exports its policy."""
DEFAULT_PPO = {"num_envs": 8, "num_steps": 256, "num_minibatches": 8, "update_epochs": 4,
               "learning_rate": 3e-4, "ent_coef": 0.01, "checkpoint_every": 5}
"""PPO fields of every run (``--config`` JSON overrides them)."""


def _flags(options: dict[str, Any]) -> list[str]:
    """``TrainOptions`` fields as ``hpcpolicy`` command-line options."""
    return [arg for name, value in options.items()
            for arg in (f"--{name.replace('_', '-')}", str(value))]


def train_until(table: Path, run: Path, options: TrainOptions, cfg: dict[str, Any],
                deadline_s: float | None) -> tuple[Trained, float]:
    """DD-PPO on ``table`` into ``run``; at ``deadline_s`` seconds it is asked to stop as a
    Ctrl-C would (the run's STOP file: the workers finish the update, checkpoint and export
    the policy; :func:`hpcpolicy.train` then deploys and cards it). What it trained and the
    wall time."""
    start = time.perf_counter()
    timer = None if deadline_s is None else threading.Timer(deadline_s, (run / "STOP").touch)
    if timer is not None:
        timer.daemon = True
        timer.start()
    try:
        trained = train(table, algo="ddppo", config=cfg, out=run, options=options)
    finally:
        if timer is not None:
            timer.cancel()
    (run / "STOP").unlink(missing_ok=True)  # in case the timer fired as the run ended
    return trained, time.perf_counter() - start


def _steady_sps(run: Path) -> float:
    """Steps per second over updates 2.. of a run's metrics.csv (the first has start-up)."""
    with (run / "metrics.csv").open(newline="") as f:
        rows = [(float(r["global_step"]), float(r["wall_time_s"])) for r in csv.DictReader(f)]
    (s0, t0), (s1, t1) = rows[0], rows[-1]
    return (s1 - s0) / (t1 - t0)


def clone_heuristic(table: Path, run: Path, backfill: str, extra: dict[str, Any],
                    a: argparse.Namespace) -> Path:
    """Behaviour cloning of ``a.warm_start``'s decisions on the training windows; its policy."""
    data, bc = run.parent / f"{run.name}.{a.warm_start}-decisions", run.parent / f"{run.name}.bc"
    args = ["dataset", "build", str(table), "--source", "heuristics", "--heuristics",
            a.warm_start, "--epsilon", "0", "--k", str(a.k), "--backfill", backfill,
            "--window-size", str(a.train_window), "--train-frac", str(a.train_frac),
            "--max-windows", str(a.bc_windows), "--seed", str(a.seed), *_flags(extra),
            "-o", str(data)]
    if subprocess.run([*hpcpolicy_cli(), "-q", *args]).returncode != 0:
        raise SystemExit(f"hpcpolicy {' '.join(args)} failed")
    return train(data, algo="bc", out=bc,
                 options=TrainOptions(steps=a.bc_steps, seed=a.seed)).policy


def train_policy(table: Path, run: Path, backfill: str, extra: dict[str, Any], cfg: dict[str, Any],
                 a: argparse.Namespace, budget_s: float | None) -> dict[str, Any]:
    """Train ``a.restarts`` policies one after another (seeds ``a.seed``, ``a.seed`` + 1, ...)
    within ``budget_s`` (calibrated; a warm start's time included) or ``a.steps`` each; the
    facts of the one deployed (the best on validation among them)."""
    run.parent.mkdir(parents=True, exist_ok=True)
    if a.snapshot_every:
        cfg = {**cfg, "snapshot_every": a.snapshot_every}
    common = TrainOptions(workers=a.workers, backfill=backfill, window_size=a.train_window,
                          train_frac=a.train_frac, reward=a.reward, k=a.k, seed=a.seed, **extra)
    warm_start = 0.0
    if a.warm_start:
        start = time.perf_counter()
        common = replace(common, init_from=clone_heuristic(table, run, backfill, extra, a))
        warm_start = time.perf_counter() - start
        if budget_s is not None:
            budget_s -= warm_start
    batch = a.workers * cfg["num_envs"] * cfg["num_steps"]
    calibration = 0.0
    steps = a.steps
    deadline = None
    if steps is None:
        assert budget_s is not None
        probe = run.parent / f"{run.name}.calibration"
        probed, calibration = train_until(table, probe, replace(common, steps=3 * batch), cfg,
                                          None)
        sps = _steady_sps(probe)
        # start-up (imports, workers, JIT), the final export and the card, as the probe had
        fixed = calibration - probed.result.wall_time_s
        per_candidate = 0.0
        if a.snapshot_every:
            # the selection scores each snapshot and the final policy: time one candidate
            per_candidate = validation_replay_s(table, probe / "policy", common)
            calibration += per_candidate
        # each restart: left = fixed + T + per_candidate * (T * sps / (batch * every) + 1)
        left = (budget_s - calibration - MARGIN_S) / a.restarts
        per_step = per_candidate / (batch * a.snapshot_every) if a.snapshot_every else 0.0
        train_s = (left - fixed - per_candidate) / (1 + per_step * sps)
        steps = max(batch, int(sps * train_s) // batch * batch)
        deadline = max(left - steps * per_step - per_candidate, 60.0)
    runs = [run, *(run.with_name(f"{run.name}.seed{a.seed + i}") for i in range(1, a.restarts))]
    trained = [train_run(table, path, replace(common, seed=a.seed + i, steps=steps), cfg,
                         deadline) for i, path in enumerate(runs)]
    best = min(trained, key=lambda t: t["validation_bsld"]) if len(trained) > 1 else trained[0]
    facts = {**best, "warm_start": a.warm_start, "warm_start_wall_s": warm_start,
             "reward": a.reward, "calibration_wall_s": calibration}
    if a.restarts > 1:
        facts["restarts"] = trained
    facts["total_wall_s"] = warm_start + calibration + sum(t["train_wall_s"] for t in trained)
    return facts


def train_run(table: Path, run: Path, options: TrainOptions, cfg: dict[str, Any],
              deadline: float | None) -> dict[str, Any]:
    """One DD-PPO run of ``options.steps`` (stopped at ``deadline`` seconds); its facts, with
    what its card says: the snapshot deployed, the guard and the deployed policy's mean bsld on
    the validation windows (None without them)."""
    trained, wall = train_until(table, run, options, cfg, deadline)
    result, card = trained.result, trained.card or {}
    validation = card.get("validation")
    return {"run": str(run), "seed": options.seed, "steps_budget": options.steps,
            "global_step": result.global_step, "updates": result.updates,
            "interrupted": result.interrupted, "train_wall_s": wall,
            "train_time_s": result.wall_time_s, "policy": str(trained.policy),
            "selection": card.get("selection"), "guard": card.get("guard"),
            "validation_bsld": None if validation is None else next(
                s["mean_bsld"] for s in validation["scores"] if s["kind"] == "learned")}


def validation_replay_s(table: Path, policy: Path, options: TrainOptions) -> float:
    """Seconds to replay one policy on the validation windows, as the snapshot choice of
    :func:`hpcpolicy.train` replays each candidate."""
    from hpcpolicy.training.validation import VALIDATION_WINDOWS, compare, load_table
    from hpcpolicy.world.split import validation_starts

    workload, machine = load_table(table, options)
    starts = validation_starts(len(workload), options.train_frac, options.val_frac,
                               size=options.window_size, count=VALIDATION_WINDOWS)
    start = time.perf_counter()
    compare(workload, machine, (str(policy),), options, {"starts": starts, "split": "all"},
            None)
    return time.perf_counter() - start


def evaluate_policy(table: Path, policy: Path, backfill: str, options: dict[str, Any],
                    a: argparse.Namespace, compat: str | None = None,
                    starts: tuple[int, ...] | None = None) -> dict[str, Any]:
    """The policy and the heuristics on identical windows; the bar's figures."""
    from hpcpolicy.compat import compat_preset
    from hpcpolicy.env.factory import load
    from hpcpolicy.evaluate import EvaluateConfig, evaluate

    workload, machine = load(table, options)
    cfg = EvaluateConfig(policies=(*HEURISTICS, str(policy)), backfills=(backfill,),
                         windows=a.windows, window_size=a.window_size, seed=a.seed,
                         split="all" if starts else "test", train_frac=a.train_frac,
                         starts=starts, compat=compat,
                         exclusive_nodes=compat_preset(compat).exclusive_nodes)
    ev = evaluate(workload, machine, cfg)
    name, best = ev.best_heuristics()[backfill]
    learned = ev.runs[-1]
    change = ev.versus_best(learned)
    return {
        "windows": list(ev.starts), "window_size": a.window_size,
        "mean_bsld": {r.config.policy if r is not learned else "learned": r.summary["mean_bsld"]
                      for r in ev.runs},
        "learned_spread": ev.spread(learned)["mean_bsld"],
        "best_heuristic": name, "best_heuristic_bsld": best, "change_vs_best": change,
        "meets_bar": change is not None and change <= BAR,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", default="lublin_256,HPC2N", help="comma-separated")
    parser.add_argument("--backfills", default="none,easy", help="comma-separated")
    parser.add_argument("--minutes", type=float, default=30.0,
                        help="training budget per trace (all its backfilling modes)")
    parser.add_argument("--steps", type=int, default=None,
                        help="fixed steps per policy instead of a time budget")
    parser.add_argument("--workers", type=int, default=2, help="DD-PPO workers")
    parser.add_argument("--train-window", type=int, default=256, help="jobs per episode")
    parser.add_argument("--train-frac", type=float, default=TRAIN_FRAC)
    parser.add_argument("--k", type=int, default=DEFAULT_K,
                        help="waiting jobs the policy sees, the oldest (hpcpolicy train --k); "
                             "jobs beyond them wait unseen when the queue is longer")
    parser.add_argument("--windows", type=int, default=10, help="evaluation windows")
    parser.add_argument("--window-size", type=int, default=1024, help="jobs per window")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--config", type=Path, default=None,
                        help="JSON of PPO fields overriding the defaults of this script")
    parser.add_argument("--reward", default="bsld",
                        help="training reward (hpcpolicy train --reward); the bar is on bsld")
    parser.add_argument("--warm-start", default=None, metavar="HEURISTIC",
                        help="first clone this heuristic's decisions (dataset build, then "
                             "--bc-steps of BC) and start DD-PPO from that policy; the "
                             "cloning's time counts against the budget")
    parser.add_argument("--bc-steps", type=int, default=10_000, help="BC gradient steps")
    parser.add_argument("--bc-windows", type=int, default=100,
                        help="at most this many training windows of the heuristic to clone")
    parser.add_argument("--snapshot-every", type=int, default=0, metavar="N",
                        help="keep the policy every N updates (0: train's default, about five "
                             "per run); train deploys the best of them on validation")
    parser.add_argument("--restarts", type=int, default=1, metavar="N",
                        help="train N policies one after another (seeds SEED, SEED+1, ...), "
                             "sharing the budget, and deploy the best on validation")
    parser.add_argument("--rlscheduler", action="store_true",
                        help="also RLScheduler's protocol on lublin_256 (see above)")
    parser.add_argument("--cache", type=Path,
                        default=Path(tempfile.gettempdir()) / "hpcpolicy-bench")
    parser.add_argument("--runs", type=Path, default=None,
                        help="where the runs go (default: a new temporary directory)")
    parser.add_argument("--out", type=Path,
                        default=RESULTS / "train_quality.json")
    a = parser.parse_args(argv)
    if a.restarts < 1:
        parser.error("--restarts N needs N >= 1")
    if (a.snapshot_every or a.restarts > 1) and a.rlscheduler:
        parser.error("--snapshot-every and --restarts choose on the validation part, which "
                     "RLScheduler's protocol (--rlscheduler: training on all of the trace) "
                     "does not have; use one or the other")

    from hpcpolicy.atomic import write_json

    cfg = {**DEFAULT_PPO, **(json.loads(a.config.read_text()) if a.config else {})}
    runs_dir = a.runs or Path(tempfile.mkdtemp(prefix="hpcpolicy-quality-"))
    backfills = a.backfills.split(",")
    budget = None if a.steps is not None else a.minutes * 60.0 / len(backfills)
    results: list[dict[str, Any]] = []
    for trace in a.traces.split(","):
        table = ingest_trace(trace, a.cache)
        extra = TRACES[trace].workload
        options = TrainOptions(**extra).workload().to_dict()
        for backfill in backfills:
            run = runs_dir / f"{trace}-{backfill}"
            row = {"trace": trace, "backfill": backfill, "protocol": "chronological split",
                   **train_policy(table, run, backfill, extra, cfg, a, budget)}
            row.update(evaluate_policy(table, Path(row["policy"]), backfill, options, a))
            results.append(row)
    if a.rlscheduler:
        table = ingest_trace("lublin_256", a.cache)
        options = TrainOptions(**RLSCHEDULER_OPTIONS).workload().to_dict()
        for backfill in backfills:
            run = runs_dir / f"rlscheduler-{backfill}"
            row = {"trace": "lublin_256", "backfill": backfill, "protocol": "rlscheduler",
                   "published": RLSCHEDULER_PUBLISHED[backfill],
                   **train_policy(table, run, backfill, RLSCHEDULER_OPTIONS, cfg, a,
                                  budget)}
            row.update(evaluate_policy(table, Path(row["policy"]), backfill, options, a,
                                       compat="rlscheduler", starts=RLSCHEDULER_STARTS))
            results.append(row)
    out = {"benchmark": "train_quality", "bar_change_vs_best": BAR, "ppo": cfg,
           "k": a.k, "workers": a.workers, "train_window": a.train_window,
           "train_frac": a.train_frac,
           "minutes_per_trace": None if a.steps is not None else a.minutes,
           "steps_per_policy": a.steps, "seed": a.seed, "results": results,
           "meets_bar": all(r["meets_bar"] for r in results if r["protocol"] != "rlscheduler"),
           "conditions": {"cpu_count": os.cpu_count(), "loadavg_1m": os.getloadavg()[0]}}
    write_json(a.out, out)
    parts = "; ".join(
        f"{r['trace']}{'/rlscheduler' if r['protocol'] == 'rlscheduler' else ''} "
        f"{r['backfill']}: {r['mean_bsld']['learned']:.2f} vs {r['best_heuristic']} "
        f"{r['best_heuristic_bsld']:.2f} ({r['change_vs_best']:+.1%}, "
        f"{r['total_wall_s']:.0f} s)"
        for r in results)
    print(f"train quality (mean bsld, learned vs best heuristic, {a.windows} x "
          f"{a.window_size}-job windows): {parts}; bar {BAR:+.0%} -> "
          f"{'met' if out['meets_bar'] else 'NOT met'} -> {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
