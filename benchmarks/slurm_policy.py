"""The policy on a real Slurm: one scaled trace window run twice on the test Slurm, as Slurm
schedules it (priority/basic = FIFO, plus backfill) and under ``hpcpolicy advise --apply
--watch 1 --policy sjf``; mean bounded slowdown and wait from each run's sacct, beside what
the simulator (the what-if's replay: FCFS+EASY vs SJF+EASY on the first run's log) predicted.
Also how the default replay reproduces the real start times of the first run (fidelity).

    python benchmarks/slurm_policy.py --jobs 60 [--first 5000] [--json out.json]

Needs root and Debian's slurm packages (tests/slurm/cluster.py); takes minutes (both runs
execute in real time). One partition (``batch``, all 4 nodes of 16 cores), so the replay's
single pool of 64 cores is the same machine.
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

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from slurm.cluster import LocalSlurm, started  # noqa: E402

from hpcpolicy.cluster import ClusterSpec  # noqa: E402
from hpcpolicy.ingest import IngestConfig, ingest  # noqa: E402
from hpcpolicy.sim.engine import simulate  # noqa: E402
from hpcpolicy.sim.metrics import outcome_table, summarize  # noqa: E402
from hpcpolicy.sim.types import SimConfig, SimResult  # noqa: E402
from hpcpolicy.slurm.submit import (  # noqa: E402
    Plan,
    ScaleConfig,
    export_sacct,
    scale_window,
    submit_plan,
    wait_finished,
)
from hpcpolicy.whatif.fidelity import fidelity  # noqa: E402
from hpcpolicy.workload import Workload  # noqa: E402

CLUSTER = ClusterSpec.homogeneous(64, 4)
TRACE = Path("/work/shared/data/KTH-SP2-1996-2.1-cln.swf.gz")


def _run(slurm: LocalSlurm, plan: Plan, work: Path, advise: bool) -> Workload:
    watcher = None
    if advise:
        watcher = subprocess.Popen(
            [str(Path(sys.executable).parent / "hpcpolicy"), "-q", "advise", "--policy", "sjf",
             "--partition", "batch", "--apply", "--watch", "1", "--audit",
             str(work / "advise.jsonl")], env=slurm.env, stdout=subprocess.DEVNULL)
        time.sleep(2)
    try:
        ids = submit_plan(plan, work / "out", slurm.env)
        wait_finished(ids.values(), slurm.env, timeout_s=3600)
    finally:
        if watcher is not None:
            watcher.send_signal(signal.SIGINT)
            watcher.wait(timeout=60)
    sacct = export_sacct(ids.values(), work / "sacct.txt", slurm.env)
    ingest([sacct], work / "jobs.parquet", IngestConfig(overwrite=True))
    return Workload.from_table(work / "jobs.parquet")


def _logged(w: Workload) -> dict[str, Any]:
    """Mean wait and bsld of the jobs as they really ran (the metrics module's definitions)."""
    start = w.logged_start
    result = SimResult(start=start, end=start + w.run_time, never_fits=np.zeros(len(w), bool),
                       killed=np.zeros(len(w), bool))
    return summarize(outcome_table(w, result), CLUSTER)


def _replay(w: Workload, policy: str) -> tuple[dict[str, Any], Any]:
    result = simulate(w, CLUSTER, SimConfig(policy=policy, backfill="easy"))
    table = outcome_table(w, result)
    return summarize(table, CLUSTER), table


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--jobs", type=int, default=60)
    ap.add_argument("--first", type=int, default=5000, help="first job of the trace window")
    ap.add_argument("--arrivals-s", type=float, default=60.0,
                    help="the window's submissions are spread over this many seconds")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    slurm = started()
    tmp = Path(tempfile.mkdtemp(prefix="slurm-policy-", dir=slurm.root))
    ingest([TRACE], tmp / "trace.parquet", IngestConfig(overwrite=True))
    whole = Workload.from_table(tmp / "trace.parquet")
    window = whole.take(range(args.first, args.first + args.jobs))
    span = int(window.submit[-1] - window.submit[0]) or 1
    plan = scale_window(window, ScaleConfig(
        time_factor=0.01, min_run_s=5, max_run_s=60, arrival_factor=args.arrivals_s / span,
        trace_procs=int(whole.procs.max()), partitions=("batch",)))
    out: dict[str, Any] = {"jobs": args.jobs, "first": args.first, "trace": TRACE.name}
    for label, advise in (("slurm_fifo_backfill", False), ("advise_sjf", True)):
        (tmp / label).mkdir()
        tic = time.monotonic()
        w = _run(slurm, plan, tmp / label, advise)
        real = _logged(w)
        out[label] = {"mean_wait_s": real["mean_wait_s"], "mean_bsld": real["mean_bsld"],
                      "wall_s": time.monotonic() - tic, "dir": str(tmp / label)}
        if not advise:
            base, table = _replay(w, "fcfs")
            cand, _ = _replay(w, "sjf")
            out["whatif_predicted"] = {
                "fcfs_easy": {"mean_wait_s": base["mean_wait_s"], "mean_bsld": base["mean_bsld"]},
                "sjf_easy": {"mean_wait_s": cand["mean_wait_s"], "mean_bsld": cand["mean_bsld"]}}
            fid = fidelity(table, w.origin, "fcfs+easy")
            starts = (table["start"] - table["logged_start"]).abs()
            out["default_replay_fidelity"] = {
                "median_abs_start_error_s": float(starts.median()),  # type: ignore[arg-type]
                "spearman_waits": fid["spearman"],
                "mean_wait_logged_s": fid["logged_mean_wait_s"],
                "mean_wait_replay_s": fid["simulated_mean_wait_s"]}
    if args.json:
        args.json.write_text(json.dumps(out, indent=2) + "\n")
    a, b, p = out["slurm_fifo_backfill"], out["advise_sjf"], out["whatif_predicted"]
    print(f"real Slurm: bsld {a['mean_bsld']:.2f} -> {b['mean_bsld']:.2f} with advise sjf "
          f"(wait {a['mean_wait_s']:.1f} -> {b['mean_wait_s']:.1f} s); what-if predicted bsld "
          f"{p['fcfs_easy']['mean_bsld']:.2f} -> {p['sjf_easy']['mean_bsld']:.2f} (wait "
          f"{p['fcfs_easy']['mean_wait_s']:.1f} -> {p['sjf_easy']['mean_wait_s']:.1f} s)")
    print(json.dumps(out["default_replay_fidelity"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
