"""Benchmark and measure site models (issues 25 and 42) on every shared trace with start times.

For each trace: the time of ``calibrate`` (fit on the first 70 %) and of one ``fidelity``
replay under the fitted model; the out-of-sample fidelity before (FCFS + EASY as the header
describes the machine) and after (Spearman, mean-wait error, trust); the ablation, and the
out-of-sample figures of the model without each kept element; issue 42's bars (better than
the plain replay on both figures, fair: Spearman >= 0.3 and |mean-wait error| <= 50 %, no kept
element that makes the out-of-sample |mean-wait error| worse); and whether the ranking of
FCFS, SJF and F1 (all with EASY) by mean wait and by mean bounded slowdown changes between
the uncalibrated and the calibrated world.

The traces are ingested once into ``--cache``, outside the repository. Output: JSON
(default ``benchmarks/results/site.json``) and one line of text. Timings taken while other
work runs on the machine are noisy; rerun on a quiet one.

Usage:
    python -m benchmarks.site [--traces HPC2N,RICC] [--out FILE] [--cache DIR] [--calibrate-only]
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks._common import RESULTS, TRACES, ingest_trace

STUDIED = ("CTC-SP2", "KTH-SP2", "HPC2N", "RICC", "Genomique")
"""The traces calibrated by default."""
POLICIES = ("fcfs", "sjf", "f1")


def _tables(cache: Path, names: list[str]) -> dict[str, Path]:
    return {name: ingest_trace(name, cache) for name in names}


def _ranking(world: Any) -> dict[str, Any]:
    """Mean wait and bounded slowdown of each policy (EASY) in ``world``, and their order."""
    from hpcpolicy.sim.engine import simulate

    w = world.workload
    figures = {}
    for policy in POLICIES:
        cfg = replace(world.cfg, policy=policy, backfill="easy")
        r = simulate(w, world.cluster, cfg)
        ok = r.start >= 0
        wait = (r.start - (w.submit - world.shift))[ok].astype(float)
        run = w.run_time[ok].astype(float)
        bsld = np.maximum((wait + run) / np.maximum(run, 10.0), 1.0)
        figures[policy] = {"mean_wait_s": float(wait.mean()), "mean_bsld": float(bsld.mean())}
    return {"figures": figures,
            "by_wait": sorted(POLICIES, key=lambda p: figures[p]["mean_wait_s"]),
            "by_bsld": sorted(POLICIES, key=lambda p: figures[p]["mean_bsld"])}


def measure(name: str, table: Path, calibrate_only: bool = False) -> dict[str, Any]:
    """Calibrate, fidelity before/after and rankings (unless ``calibrate_only``) for one
    trace."""
    from hpcpolicy.cluster_io import resolve_cluster
    from hpcpolicy.errors import HpcPolicyError
    from hpcpolicy.site.calibrate import calibrate
    from hpcpolicy.site.fidelity import fidelity_report
    from hpcpolicy.workload import Workload
    from hpcpolicy.world import SiteModel, apply_site
    from hpcpolicy.world.apply import logged_delay

    tic, cpu = time.perf_counter(), time.process_time()
    try:
        w = Workload.from_table(table)
        cluster = resolve_cluster(procs=TRACES[name].procs, table=table)
        delay = logged_delay(table, w)
        cal = calibrate(w, cluster, delay=delay, source=str(table))
    except HpcPolicyError as exc:
        return {"trace": name, "error": str(exc)}
    calibrate_s, calibrate_cpu_s = time.perf_counter() - tic, time.process_time() - cpu
    keys = ("spearman", "mean_wait_rel_error", "trust", "jobs")
    fitted = {
        "trace": name, "jobs": len(w), "cores": cluster.total_cores,
        "calibrate_s": calibrate_s, "calibrate_cpu_s": calibrate_cpu_s,
        "replays": cal.site.provenance.get("replays"),
        "elements": cal.site.elements(), "availability": cal.site.availability,
        "user_jobs": cal.site.user_jobs, "user_cores": cal.site.user_cores,
        "priority": cal.site.priority, "backfill": cal.site.backfill,
        "before": {k: cal.before[k] for k in keys}, "after": {k: cal.after[k] for k in keys},
        "outages": len(cal.site.outages), "ablation": cal.ablation, "without": cal.without,
        "bars": _bars(cal.before, cal.after, cal.without),
    }
    if calibrate_only:
        return fitted
    tic = time.perf_counter()
    fidelity_report(w, cluster, cal.site, delay=delay)
    fidelity_s = time.perf_counter() - tic
    before = _ranking(apply_site(SiteModel(), w, cluster))
    after = _ranking(apply_site(cal.site, w, cluster, delay=delay))
    return fitted | {
        "fidelity_s": fidelity_s, "ranking_uncalibrated": before, "ranking_calibrated": after,
        "ranking_changes": {k: before[k] != after[k] for k in ("by_wait", "by_bsld")},
    }


def _bars(before: dict[str, Any], after: dict[str, Any],
          without: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Issue 42's bars on one trace's out-of-sample figures."""
    def err(part: dict[str, Any]) -> float:
        return abs(part["mean_wait_rel_error"])

    return {
        "both_better": after["spearman"] > before["spearman"] and err(after) < err(before),
        "fair": after["spearman"] >= 0.3 and err(after) <= 0.5,
        "elements_worsening_mean_wait": [k for k, v in without.items()
                                         if v["mean_wait_rel_error"] is not None
                                         and err(after) > err(v)],
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", default=",".join(STUDIED))
    parser.add_argument("--out", type=Path, default=RESULTS / "site.json")
    parser.add_argument("--cache", type=Path, default=Path("/tmp/hpcpolicy-bench-site"))
    parser.add_argument("--calibrate-only", action="store_true",
                        help="skip the fidelity replay and the rankings after calibrate")
    args = parser.parse_args(argv)
    args.cache.mkdir(parents=True, exist_ok=True)
    names = [n for n in args.traces.split(",") if n]
    from hpcpolicy.atomic import write_json

    args.out.parent.mkdir(parents=True, exist_ok=True)
    results = []
    for n, t in _tables(args.cache, names).items():
        results.append(measure(n, t, args.calibrate_only))
        write_json(args.out, {"traces": results})  # each trace as soon as it is measured
    print("; ".join(
        f"{r['trace']}: " + (r["error"][:60] if "error" in r else
                             f"calibrate {r['calibrate_s']:.1f} s (CPU "
                             f"{r['calibrate_cpu_s']:.1f} s), rho "
                             f"{r['before']['spearman']:.2f}->"
                             f"{r['after']['spearman']:.2f}, mean err "
                             f"{r['before']['mean_wait_rel_error']:+.0%}->"
                             f"{r['after']['mean_wait_rel_error']:+.0%}, "
                             f"both better {r['bars']['both_better']}, "
                             f"fair {r['bars']['fair']}, worsening "
                             f"{r['bars']['elements_worsening_mean_wait']}")
        for r in results))


if __name__ == "__main__":
    main()
