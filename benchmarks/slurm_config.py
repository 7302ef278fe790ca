"""Slurm configuration changes proved on the real Slurm (issue 40, item 5): the same scaled
window of KTH-SP2 (200 jobs) runs on the test Slurm under a multifactor baseline and under
four candidate changes of different kinds, several times each; the measured change of mean
wait and mean bounded slowdown is set beside the what-if's prediction (the Slurm world's
replay of the baseline log under the baseline and under the candidate).

    PYTHONPATH=tests python -m benchmarks.slurm_config --runs 3 [--out DIR]
    PYTHONPATH=tests python -m benchmarks.slurm_config --out DIR --no-collect   # replay only

The real runs of 2026-11-28 (docs/lab/slurm-config.md) are kept in
``tests/data/slurm_config_runs.tar.gz``: ``tar xzf`` it into a folder and pass its ``runs``
folder as ``--out DIR --no-collect`` to judge a changed Slurm world against them.

Collecting needs the test Slurm (root and Debian's slurm packages; tests/slurm/cluster.py
starts it) and runs in real time, about 3.5 minutes a run; the runs go round by round
(baseline, then each candidate), so a drift of the shared machine's load reaches every
configuration alike. A run whose ``sacct.txt`` is already in DIR is kept, so an interrupted
collection resumes, and ``--no-collect`` only reads and replays what DIR holds. DIR gets
``table.md`` and ``table.json``.

The window (KTH-SP2 from job 20000): runs x 0.005 clipped to 2-12 s, sizes x 64/100 cores,
the 200 submissions spread over 80 s, so the work (7,775 core-seconds) asks for about 1.5
times what the 64 cores give while jobs arrive (load > 1: a queue forms, and the order the
knobs choose matters); four Unix users, two per account.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks._common import DATA, RESULTS, TRACES
from hpcpolicy.errors import HpcPolicyError
from hpcpolicy.ingest import IngestConfig, ingest
from hpcpolicy.slurm.submit import Plan, ScaleConfig, scale_window
from hpcpolicy.world.open import open_workload

CANDIDATES = {
    "age-weight": "PriorityWeightAge=10000",
    "favor-small": "PriorityFavorSmall=YES",
    "qos-max-jobs": "qos normal MaxJobsPerUser=2",
    "bf-max-job-test": "bf_max_job_test=3",
}
"""The changes: a priority weight, the job size factor, a QOS per-user limit and a backfill
parameter."""
TRACE, FIRST, JOBS = "KTH-SP2", 20000, 200


def proof_plan(jobs: int = JOBS, arrivals_s: float = 80.0) -> Plan:
    """The scaled window every configuration runs (see the module docstring)."""
    from slurm.proof import USERS

    with tempfile.TemporaryDirectory(prefix="slurm-config-") as tmp:
        table = Path(tmp) / "trace.parquet"
        ingest([DATA / TRACES[TRACE].file], table, IngestConfig(overwrite=True))
        whole = open_workload(table)
    window = whole.take(range(FIRST, FIRST + jobs))
    return scale_window(window, ScaleConfig(
        time_factor=0.005, min_run_s=2, max_run_s=12, arrivals_s=arrivals_s,
        partitions=("batch",), users=USERS, trace_procs=int(whole.procs.max())))


def collect(out: Path, runs: int, plan: Plan, candidates: dict[str, str]) -> None:
    """Run the baseline and ``candidates`` ``runs`` times each on the test Slurm into
    ``out/NAME/runK``."""
    from slurm.cluster import started
    from slurm.proof import add_users, prepare, restored, run_setup

    slurm = started()
    setups = prepare(slurm, out, candidates)
    add_users(slurm)
    with restored(slurm):
        for k in range(runs):
            for setup in setups:
                folder = out / setup.name / f"run{k}"
                if (folder / "sacct.txt").exists():
                    continue
                run_setup(slurm, setup, plan, folder)
                print(f"{setup.name} run {k}: {folder}", flush=True)


def _cell(x: float | bool | None, fmt: str = "{:+.2f}") -> str:
    if x is None:
        return "n/a"
    if isinstance(x, bool):
        return "yes" if x else "NO"
    return fmt.format(x)


def starts(out: Path) -> dict[str, Any]:
    """The starts-under-multifactor bar on the baseline's runs in ``out``."""
    from hpcpolicy.slurm.config_proof import BASELINE, real_start_errors, world_start_errors

    real, world = real_start_errors(out), world_start_errors(out, BASELINE)
    return {"real_run_to_run_median_abs_start_error_s": real,
            "world_median_abs_start_error_s": world,
            "holds": bool(real) and bool(np.median(world) <= np.median(real))}


def table(out: Path) -> dict[str, Any]:
    """The measured figures, the predictions where the Slurm world replays, and the bars;
    written to ``out/table.json`` and ``out/table.md``."""
    from hpcpolicy.slurm.config_proof import (
        BASELINE,
        judge,
        measured,
        predicted,
        real_start_errors,
        world_start_errors,
    )

    runs = measured(out, [BASELINE, *CANDIDATES])
    doc: dict[str, Any] = {"candidates": CANDIDATES, "runs": runs,
                           "real_run_to_run_median_abs_start_error_s": real_start_errors(out)}
    try:
        prediction: dict[str, dict[str, float]] | None = predicted(out, list(CANDIDATES))
        doc["world_median_abs_start_error_s"] = {
            name: world_start_errors(out, name) for name in [BASELINE, *CANDIDATES]}
        doc["multifactor_bar_holds"] = bool(
            np.median(doc["world_median_abs_start_error_s"][BASELINE])
            <= np.median(doc["real_run_to_run_median_abs_start_error_s"]))
    except HpcPolicyError as exc:
        prediction, doc["prediction_error"] = None, str(exc)
    doc["judged"] = [j.row() for j in judge(runs, prediction)]
    lines = ["| candidate | change | figure | baseline runs | candidate runs | measured "
             "change (mean +- std) | outside spread | predicted | sign | within 2 std |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for j in doc["judged"]:
        m = j["metric"]
        base = ", ".join(f"{f[m]:.2f}" for f in runs[BASELINE])
        cand = ", ".join(f"{f[m]:.2f}" for f in runs[j["candidate"]])
        lines.append(f"| {j['candidate']} | `{CANDIDATES[j['candidate']]}` | {m} | {base} | "
                     f"{cand} | {j['measured_mean']:+.2f} +- {j['measured_std']:.2f} | "
                     f"{_cell(j['outside_spread'])} | {_cell(j['predicted'])} | "
                     f"{_cell(j['sign_ok'])} | {_cell(j['within_2std'])} |")
    lines.append("")
    lines.append("Median |start error| (s), real run to run: " + ", ".join(
        f"{x:.1f}" for x in doc["real_run_to_run_median_abs_start_error_s"]))
    for name, errors in doc.get("world_median_abs_start_error_s", {}).items():
        lines.append(f"Median |start error| (s), the Slurm world on each run of {name}: "
                     + ", ".join(f"{x:.1f}" for x in errors))
    if "multifactor_bar_holds" in doc:
        lines.append("Starts under multifactor (the world's median over the baseline runs <= "
                     "the real run-to-run median): "
                     + _cell(doc["multifactor_bar_holds"]))
    if "prediction_error" in doc:
        lines.append(f"No prediction: {doc['prediction_error']}")
    (out / "table.json").write_text(json.dumps(doc, indent=2) + "\n")
    (out / "table.md").write_text("\n".join(lines) + "\n")
    return doc


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=3, help="real runs per configuration")
    ap.add_argument("--jobs", type=int, default=JOBS)
    ap.add_argument("--out", type=Path, default=RESULTS / "slurm_config")
    ap.add_argument("--no-collect", action="store_true",
                    help="only replay and compare the runs already in --out")
    ap.add_argument("--baseline-only", action="store_true",
                    help="collect and judge only the baseline (the starts-under-multifactor bar)")
    args = ap.parse_args(argv)
    if not args.no_collect:
        collect(args.out, args.runs, proof_plan(args.jobs),
                {} if args.baseline_only else CANDIDATES)
    if args.baseline_only:
        print(json.dumps(starts(args.out), indent=2))
        return 0
    table(args.out)
    print((args.out / "table.md").read_text(), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
