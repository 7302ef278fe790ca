"""Speed of one ``hpcpolicy advise`` pass on a queue of N pending jobs, reading included.

On the Slurm that SLURM_CONF names (the test Slurm: ``tests/slurm/up.sh``, which needs root
and Debian's slurm packages, prints the line to export), submits N jobs that stay pending
(``--begin`` two hours ahead), then times full dry-run passes (``squeue`` + ``sinfo`` in their
text formats + ranking + predicted starts), and, on the same queue, the time ``squeue --json``
+ ``sinfo --json`` take merely to print it (advise's former reading) with the given policy. The
first pass is reported apart: it may compile the simulator's kernels on a fresh install
(numba caches them afterwards). The jobs are cancelled at the end.

    python -m benchmarks.advise --jobs 2000 --passes 5 [--policy sjf] [--json out.json]

Prints one line and, with --json, writes the figures. The bar: a pass <= 1 s at 2,000 jobs.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from benchmarks._common import slurm_env
from hpcpolicy.slurm.advise import AdviseConfig, advise_pass


def _sbatch(env: dict[str, str], i: int) -> str:
    part, longest = ("batch", 120) if i % 3 else ("short", 10)
    out = subprocess.run(
        ["sbatch", "--parsable", "--output=/dev/null", "--begin=now+7200",
         f"--partition={part}", f"--ntasks={1 + i % 16}", f"--time={1 + (i * 7) % longest}",
         "--wrap", "sleep 1"], env=env, capture_output=True, text=True, check=True).stdout
    return out.strip().split(";")[0]


def _submit(env: dict[str, str], n: int) -> list[str]:
    with ThreadPoolExecutor(6) as pool:  # sbatch waits on slurmctld: overlap the calls
        return list(pool.map(lambda i: _sbatch(env, i), range(n)))


def _json_read_s(env: dict[str, str]) -> float:
    """Seconds to print the same queue and nodes as JSON (what advise read before)."""
    tic = time.perf_counter()
    for cmd in ("squeue", "sinfo"):
        subprocess.run([cmd, "--json"], env=env, capture_output=True, check=True)
    return time.perf_counter() - tic


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--jobs", type=int, default=2000)
    ap.add_argument("--passes", type=int, default=5)
    ap.add_argument("--policy", default="sjf")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    env = slurm_env()
    tic = time.perf_counter()
    ids = _submit(env, args.jobs)
    submit_s = time.perf_counter() - tic
    try:
        cfg = AdviseConfig(policy=args.policy)
        runs = [advise_pass(cfg, env) for _ in range(args.passes + 1)]
        json_s = [_json_read_s(env) for _ in range(args.passes)]
    finally:
        subprocess.run(["scancel", *ids], env=env, check=False)
    first, warm = runs[0], runs[1:]
    totals = [r.timings_s["total"] for r in warm]
    result = {
        "pending_jobs": len(warm[0].ranked), "policy": args.policy, "passes": len(warm),
        "first_pass_s": first.timings_s["total"], "pass_s_median": statistics.median(totals),
        "pass_s_max": max(totals),
        "read_s_median": statistics.median(r.timings_s["read"] for r in warm),
        "rank_s_median": statistics.median(r.timings_s["rank"] for r in warm),
        "predict_s_median": statistics.median(r.timings_s["predict"] for r in warm),
        "submit_s": submit_s,
        "json_print_s_median": statistics.median(json_s),
    }
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    print(f"advise pass on {result['pending_jobs']} pending jobs ({args.policy}): median "
          f"{result['pass_s_median']:.3f} s, max {result['pass_s_max']:.3f} s (read "
          f"{result['read_s_median']:.3f}, rank {result['rank_s_median']:.3f}, predict "
          f"{result['predict_s_median']:.3f}); first pass {result['first_pass_s']:.3f} s; "
          f"squeue + sinfo --json alone {result['json_print_s_median']:.3f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
