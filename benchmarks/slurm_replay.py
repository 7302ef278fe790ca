"""The Slurm flavour of the replay against a real Slurm: a scaled trace window (two
partitions, 4 nodes of 16 cores) runs on the test Slurm; its sacct log is replayed by the
default replay (FCFS+EASY on one pool of 64 cores) and by :mod:`hpcpolicy.slurm.replay`, and
each replay's start times are compared with the real ones job by job.

    python -m benchmarks.slurm_replay --jobs 200 --log-dir DIR [--json out.json]
    python -m benchmarks.slurm_replay --log-dir DIR --compare-log DIR2   # also real vs real

With ``--log-dir``, a DIR that already holds ``sacct.txt`` is replayed without running the
cluster again; otherwise the window is run on the Slurm that SLURM_CONF names (the test
Slurm: ``tests/slurm/up.sh``, which needs root and Debian's slurm packages, prints the line to
export; minutes in real time) and its log is kept there. ``--compare-log``
names a second run of the same window (jobs matched by name): its real start times are
scored against the first run's, the noise floor of the real Slurm on that window.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import polars as pl
from scipy.stats import spearmanr

from benchmarks._common import DATA, TRACES, slurm_env
from hpcpolicy.cluster import ClusterSpec
from hpcpolicy.ingest import IngestConfig, ingest
from hpcpolicy.sim.engine import simulate
from hpcpolicy.sim.types import SimConfig
from hpcpolicy.slurm.replay import (
    SlurmReplayConfig,
    slurm_replay,
    start_latencies,
)
from hpcpolicy.slurm.submit import (
    ScaleConfig,
    export_sacct,
    scale_window,
    submit_plan,
    wait_finished,
)
from hpcpolicy.workload import Workload
from hpcpolicy.world.open import open_workload

TRACE = DATA / TRACES["KTH-SP2"].file
NODES = {"batch": (0, 1, 2, 3), "short": (2, 3)}
"""The test cluster's partitions (tests/slurm/cluster.py PARTITIONS) as node indices."""


def _collect(args: argparse.Namespace, log_dir: Path) -> Path:
    env = slurm_env()
    with tempfile.TemporaryDirectory(prefix="slurm-replay-") as tmp:
        ingest([TRACE], Path(tmp) / "trace.parquet", IngestConfig(overwrite=True))
        whole = open_workload(Path(tmp) / "trace.parquet")
    window = whole.take(range(args.first, args.first + args.jobs))
    plan = scale_window(window, ScaleConfig(
        time_factor=0.01, min_run_s=5, max_run_s=args.max_run_s, arrivals_s=args.arrivals_s,
        trace_procs=int(whole.procs.max())))
    work = Path(tempfile.mkdtemp(prefix="slurm-replay-"))
    ids = submit_plan(plan, work, env)
    wait_finished(ids.values(), env, timeout_s=3600)
    log_dir.mkdir(parents=True, exist_ok=True)
    return export_sacct(ids.values(), log_dir / "sacct.txt", env)


def read_log(log_dir: Path) -> tuple[Workload, list[str]]:
    """The log's jobs and each one's job name (the plan's, the same in every run)."""
    sacct = log_dir / "sacct.txt"
    ingest([sacct], log_dir / "jobs.parquet", IngestConfig(overwrite=True))
    table = pl.read_parquet(log_dir / "jobs.parquet", columns=["job_id", "job_name"])
    name = dict(zip(table["job_id"].to_list(), table["job_name"].to_list(), strict=True))
    w = open_workload(log_dir / "jobs.parquet")
    return w, [name[str(w.job_id[k])] for k in range(len(w))]


def _other_run(names: list[str], w: Workload, other: Workload, other_names: list[str]
               ) -> dict[str, float]:
    """The other run's figures against ``w``: its start of each job (matched by job name)
    on ``w``'s clock (both runs' first submissions at t = 0), and its own waits (a job's
    submission moves by up to a second between runs)."""
    where = {n: i for i, n in enumerate(other_names)}
    missing = [n for n in names if n not in where]
    if missing:
        raise SystemExit(f"--compare-log: job {missing[0]} of the first log is not in the "
                         "second; compare two runs of the same window")
    idx = np.array([where[n] for n in names])
    start = np.asarray(other.logged_start[idx] - other.submit.min() + w.submit.min())
    return _figures(w, start, other.logged_start[idx] - other.submit[idx])


def _figures(w: Workload, start: npt.NDArray[np.int64],
             waits: npt.NDArray[np.int64] | None = None) -> dict[str, float]:
    """Start errors against ``w``'s logged starts; waits are start - submit unless given."""
    real_wait = (w.logged_start - w.submit).astype(float)
    wait = (start - w.submit if waits is None else waits).astype(float)
    rho = spearmanr(real_wait, wait).statistic
    return {"median_abs_start_error_s": float(np.median(np.abs(start - w.logged_start))),
            "spearman_waits": float(rho),
            "mean_wait_real_s": float(real_wait.mean()),
            "mean_wait_replay_s": float(wait.mean()),
            "mean_wait_change": float(wait.mean() / real_wait.mean() - 1)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--jobs", type=int, default=200)
    ap.add_argument("--first", type=int, default=5000, help="first job of the trace window")
    ap.add_argument("--arrivals-s", type=float, default=200.0,
                    help="the window's submissions are spread over this many seconds")
    ap.add_argument("--max-run-s", type=int, default=30)
    ap.add_argument("--log-dir", type=Path, required=True)
    ap.add_argument("--bf-resolution", type=int, default=60,
                    help="the flavour's bf_resolution (the test Slurm's is Slurm's default, 60)")
    ap.add_argument("--compare-log", type=Path,
                    help="a second run of the same window: score its real starts too")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    sacct = args.log_dir / "sacct.txt"
    if not sacct.exists():
        _collect(args, args.log_dir)
    w, names = read_log(args.log_dir)
    default = simulate(w, ClusterSpec.homogeneous(64, 4), SimConfig(policy="fcfs",
                                                                   backfill="easy"))
    flavour = slurm_replay(w, SlurmReplayConfig(cores_per_node=16, nodes=4,
                                                bf_resolution=args.bf_resolution), NODES)
    sub_lat, end_lat = start_latencies(w)
    out: dict[str, Any] = {
        "log": str(sacct), "jobs": len(w), "bf_resolution": args.bf_resolution,
        "partitions": {p: int(np.sum(w.partition == i)) for i, p in enumerate(w.partitions)},
        "fitted_latency_s": {"submit": sub_lat, "end": end_lat},
        "default_replay": _figures(w, default.start),
        "slurm_replay": _figures(w, flavour.start)}
    labels = ["default_replay", "slurm_replay"]
    if args.compare_log:
        out["compare_log"] = str(args.compare_log / "sacct.txt")
        out["other_real_run"] = _other_run(names, w, *read_log(args.compare_log))
        labels.append("other_real_run")
    if args.json:
        args.json.write_text(json.dumps(out, indent=2) + "\n")
    print(f"fitted latencies: submit {sub_lat:.2f} s, end {end_lat:.2f} s")
    for label in labels:
        f = out[label]
        print(f"{label}: median |start error| {f['median_abs_start_error_s']:.1f} s, Spearman "
              f"of waits {f['spearman_waits']:.3f}, mean wait {f['mean_wait_real_s']:.2f} s real"
              f" / {f['mean_wait_replay_s']:.2f} s replay ({f['mean_wait_change']:+.1%})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
