"""Benchmark ingest, stats and ``whatif`` on a ten-million-job log (issue 30, item 4).

The log: HPC2N repeated 50 times (``--repeat``) as SWF, each pass's job ids after the last
pass's and its submits after the last pass's span, with HPC2N's own header (120 nodes of 2
cores, its start time): 10,143,550 jobs over 175 years, built once into ``--cache``
(outside the repository) by ``benchmarks/ingest.py``'s ``build_swf``. A real trace keeps
what a generated one lacks: requested times, users, partitions and logged waits (fidelity).

Three ``hpcpolicy`` processes in a row, each measured on its own (wall; CPU seconds and peak
RSS of the process, from ``os.wait4``):

* ``ingest``: ``hpcpolicy ingest LOG.swf -o LOG.parquet --overwrite``;
* ``stats``: ``hpcpolicy stats LOG.parquet --json ...``;
* ``whatif``: the command below, nine whole-log replays (3 policies x the log as it was
  and two scenarios), six comparisons with a 2,000-replicate bootstrap, breakdowns,
  fidelity and the four report files::

    hpcpolicy whatif LOG.parquet --baseline fcfs+easy --candidate sjf+easy \\
        --candidate f1+easy --scenario nodes=+10% --scenario estimates=actual -o REPORT

Then the same ``whatif`` command on HPC2N itself (202,871 jobs), in the same run, for
scale. The bar of issue 30: the 10 M-job ``whatif`` in <= 60 s and <= 4 GB peak RSS.
A process past ``--timeout`` is stopped and recorded as such. The numba cache must be warm
(run any ``hpcpolicy simulate`` once after installing). Output: JSON (default
``benchmarks/results/whatif_10m.json``) and one line of text with the load average.

Usage:
    python -m benchmarks.whatif_10m [--repeat 50] [--cache DIR] [--timeout 1200] [--out FILE]
    python -m benchmarks.whatif_10m --repeat 5        # a 1 M-job try (about 2 min)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmarks._common import RESULTS
from benchmarks.cli import hpcpolicy_cli
from benchmarks.ingest import SACCT_SOURCE, build_swf
from benchmarks.simulate import ingest_traces

BAR_S, BAR_RSS_MB = 60.0, 4096.0
WHATIF = ["--baseline", "fcfs+easy", "--candidate", "sjf+easy", "--candidate", "f1+easy",
          "--scenario", "nodes=+10%", "--scenario", "estimates=actual"]


def _run(cmd: list[str], timeout: float) -> dict[str, Any]:
    """Wall, CPU seconds and peak RSS of one process, ``timed_out`` if it was stopped.

    A small interpreter starts the process and reads its own RUSAGE_CHILDREN afterwards:
    that holds this one process alone, so its peak RSS is not the largest of earlier ones.
    """
    probe = ("import json, os, resource, subprocess, sys, time\n"
             "t = time.perf_counter()\n"
             "p = subprocess.Popen(sys.argv[2:], stdout=subprocess.DEVNULL, "
             "stderr=subprocess.PIPE, text=True)\n"
             "try:\n"
             "    _, err = p.communicate(timeout=float(sys.argv[1])); out = False\n"
             "except subprocess.TimeoutExpired:\n"
             "    p.kill(); _, err = p.communicate(); out = True\n"
             "u = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
             "print(json.dumps({'seconds': round(time.perf_counter() - t, 2), 'timed_out': out,"
             " 'returncode': p.returncode, 'cpu_s': round(u.ru_utime + u.ru_stime, 1),"
             " 'peak_rss_mb': round(u.ru_maxrss / 1024), 'stderr': err[-2000:]}))\n")
    done = subprocess.run([sys.executable, "-c", probe, str(timeout), *cmd], check=True,
                          capture_output=True, text=True)
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    if result["returncode"] and not result["timed_out"]:
        raise SystemExit(f"whatif_10m: {' '.join(cmd)} failed:\n{result['stderr']}")
    del result["stderr"], result["returncode"]
    return result


def main(argv: list[str] | None = None) -> None:
    """Build the log, measure the four processes, write JSON and print one line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=50, help="HPC2N passes (50: 10.1 M jobs)")
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) /
                        "hpcpolicy-bench")
    parser.add_argument("--timeout", type=float, default=1200.0,
                        help="seconds after which a process is stopped and recorded as such")
    parser.add_argument("--out", type=Path, default=RESULTS / "whatif_10m.json")
    args = parser.parse_args(argv)
    args.cache.mkdir(parents=True, exist_ok=True)
    swf = build_swf(args.cache, args.repeat, source=SACCT_SOURCE, name="hpc2n",
                    keep_header=True)
    table = swf.with_suffix(".parquet")
    hpc2n = ingest_traces(args.cache)["HPC2N"]["full"]
    cli = hpcpolicy_cli()
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(dir=args.cache) as tmp:
        steps = {
            "ingest": [*cli, "-q", "ingest", str(swf), "-o", str(table), "--overwrite"],
            "stats": [*cli, "-q", "stats", str(table), "--json", f"{tmp}/stats.json"],
            "whatif": [*cli, "-q", "whatif", str(table), *WHATIF, "-o", f"{tmp}/big",
                       "--overwrite"],
            "whatif_hpc2n": [*cli, "-q", "whatif", str(hpc2n), *WHATIF, "-o", f"{tmp}/small",
                             "--overwrite"],
        }
        result: dict[str, Any] = {name: _run(cmd, args.timeout) for name, cmd in steps.items()}
    big = result["whatif"]
    doc = {
        "log": str(swf), "jobs": json.loads(table.with_suffix(".ingest.json").read_text())
        ["jobs_kept"], "command": "hpcpolicy whatif LOG.parquet " + " ".join(WHATIF)
        + " -o REPORT", **result,
        "bar": {"seconds": BAR_S, "peak_rss_mb": BAR_RSS_MB,
                "met": not big["timed_out"] and big["seconds"] <= BAR_S
                and big["peak_rss_mb"] <= BAR_RSS_MB},
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "load_avg_1m_before": load_before, "load_avg_1m": os.getloadavg()[0]},
    }
    from hpcpolicy.atomic import write_json

    write_json(args.out, doc)

    def shown(name: str) -> str:
        r = result[name]
        stop = " (stopped)" if r["timed_out"] else ""
        return (f"{r['seconds']:.1f} s{stop}, {r['cpu_s']:.0f} CPU-s, "
                f"{r['peak_rss_mb']:,} MiB")

    print(f"{doc['jobs']:,} jobs: ingest {shown('ingest')}; stats {shown('stats')}; whatif "
          f"{shown('whatif')} (bar {BAR_S:.0f} s, {BAR_RSS_MB:,.0f} MiB: "
          f"{'met' if doc['bar']['met'] else 'not met'}); the same whatif on HPC2N "
          f"{shown('whatif_hpc2n')}; load {load_before:.1f} -> "
          f"{doc['machine']['load_avg_1m']:.1f} -> {args.out}")


if __name__ == "__main__":
    main()
