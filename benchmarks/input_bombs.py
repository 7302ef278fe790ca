"""Peak memory and time of ``hpcpolicy`` on each input bomb of issue 38, at full size.

The bombs are those of ``benchmarks/builders/input_bombs.py`` (the test suite builds them just
past each limit), here at the sizes of the issue's findings: a 3 GB field in a gzipped CSV, a 3 GB
line after an SWF header, 3 GB of zeros read as SWF, a 200 MB field in a Helios log, gzip
data that expands 340 times to 3 GB, a sacct header of 400,000 columns, a CSV header of
200 KB, and cluster specs of 10,000 and 300,000 node groups. Each runs as its own process
under ``/usr/bin/time -v`` (peak resident memory of that process) with a 120 s limit.

The bar: every bomb exits 1 with one ``error:`` line and no traceback, under 2 GB peak
memory, within 60 s. Exit 1 when one misses it.

Measured 2026-11-28 on the shared 2-core development machine (peak RSS, wall time, all
exit 1 with one line): csv_gz_field 120 MB 4.4 s, swf_gz_line 179 MB 6.1 s, swf_zeros 165 MB
13.5 s (most of it the input's SHA-256, which the pipeline waits for), helios_field 114 MB
3.0 s, swf_gz_ratio 641 MB 9.1 s (refused at 106 MB out), sacct_columns 145 MB 3.5 s,
csv_long_header 79 MB 1.9 s, cluster_groups_10k 121 MB 3.4 s, cluster_groups_300k 117 MB
3.9 s. Before the bounds (issue 38): > 8 GB, 6.6 GB, 6.6 GB, a 200 MB field kept, no guard,
> 120 s, "is --format right?", > 8 GB and 250 GiB asked.

The builders are shared with the tests (:mod:`benchmarks.builders.input_bombs`):

    python -m benchmarks.input_bombs        # all, full size (builds ~10 GB)
    python -m benchmarks.input_bombs --scale 0.01 --only swf_zeros
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks._common import RESULTS
from benchmarks.builders.input_bombs import BOMBS
from benchmarks.cli import hpcpolicy_cli

GB = 10**9
FULL: list[tuple[str, str, int]] = [
    ("csv_gz_field", "csv_gz_field", 3 * GB),
    ("swf_gz_line", "swf_gz_line", 3 * GB),
    ("swf_zeros", "swf_zeros", 3 * GB),
    ("helios_field", "helios_field", 200 * 10**6),
    ("swf_gz_ratio", "swf_gz_ratio", 3 * GB),
    ("sacct_columns", "sacct_columns", 400_000),
    ("csv_long_header", "csv_long_header", 200_000),
    ("cluster_groups_10k", "cluster_groups", 10_000),
    ("cluster_groups_300k", "cluster_groups", 300_000),
]
"""(name, builder in ``BOMBS``, full size)."""
BAR_RSS_KB, BAR_SECONDS, LIMIT_SECONDS = 2 * 10**6, 60.0, 120


def run(args: list[str]) -> dict[str, object]:
    """Run ``hpcpolicy ARGS`` under ``/usr/bin/time -v``; its exit code, peak RSS, time and
    stderr lines."""
    t0 = time.perf_counter()
    try:
        done = subprocess.run(["/usr/bin/time", "-v", *hpcpolicy_cli(), *args], capture_output=True,
                              text=True, timeout=LIMIT_SECONDS)
    except subprocess.TimeoutExpired:
        return {"exit": None, "rss_mb": None, "seconds": LIMIT_SECONDS, "lines": [],
                "timed_out": True}
    seconds = time.perf_counter() - t0
    rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", done.stderr)
    lines = [ln for ln in done.stderr.splitlines()
             if ln.strip() and not ln.startswith("\t") and "Command exited" not in ln]
    return {"exit": done.returncode, "rss_mb": int(rss[1]) / 1024 if rss else None,
            "seconds": round(seconds, 2), "lines": lines, "timed_out": False}


def passes(result: dict[str, object]) -> bool:
    """Whether a run meets the bar (exit 1, one error line, no traceback, memory, time)."""
    lines = result["lines"]
    rss = result["rss_mb"]
    return (result["exit"] == 1 and isinstance(lines, list) and len(lines) == 1
            and str(lines[0]).startswith("error: ") and isinstance(rss, float)
            and rss * 1024 < BAR_RSS_KB and float(str(result["seconds"])) < BAR_SECONDS)


def main(argv: list[str] | None = None) -> int:
    """Build and run the bombs; print one line each and write the JSON results."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0, help="size factor (1 = full)")
    parser.add_argument("--only", default="", help="comma-separated bomb names")
    parser.add_argument("--out", type=Path, default=RESULTS / "input_bombs.json")
    opts = parser.parse_args(argv)
    chosen = [b for b in FULL if not opts.only or b[0] in opts.only.split(",")]
    results, ok = [], True
    for name, builder, size in chosen:
        with tempfile.TemporaryDirectory(prefix=f"bomb-{name}-") as folder:
            t0 = time.perf_counter()
            args = BOMBS[builder](Path(folder), max(1, int(size * opts.scale)))
            built = {p.name: p.stat().st_size for p in Path(folder).iterdir() if p.is_file()}
            build_s = time.perf_counter() - t0
            result = {"bomb": name, "size": int(size * opts.scale), "files": built,
                      "build_s": round(build_s, 1), **run(args)}
        result["meets_bar"] = passes(result)
        ok &= bool(result["meets_bar"])
        results.append(result)
        lines = result["lines"] if isinstance(result["lines"], list) else []
        print(f"{name:20} size {result['size']:>13,}  files {sum(built.values()):>13,} B  "
              f"exit {result['exit']}  peak {result['rss_mb'] or 0:7.0f} MB  "
              f"{result['seconds']:6.2f} s  {'ok' if result['meets_bar'] else 'MISSES THE BAR'}"
              f"  {(lines[-1] if lines else '')[:150]}", flush=True)
    opts.out.parent.mkdir(parents=True, exist_ok=True)
    opts.out.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
