"""Benchmark ``hpcpolicy.ingest.ingest()`` on large Slurm sacct and SWF logs.

Inputs are built once into ``--cache`` (outside the repository; reused while their size
matches): a sacct export from ``../shared/tools/swf2sacct.py --repeat K --gpus`` over HPC2N
(15 passes: 10.0 M lines), and RICC repeated K times as SWF (5 passes: 2.24 M jobs; each
pass shifts job ids past the previous ones and submit times past their span).

For each input, in separate child processes (so that peak memory and CPU time are the
child's own), each measured after its imports (``polars``; ``hpcpolicy.ingest``, whose readers
and their compiled kernels load inside ``ingest()`` and are timed):

* ``ingest``: the whole public ``ingest()`` (plan, read, clean, write Parquet + rejects +
  report); ``rows_per_s`` = rows read / its seconds;
* ``scan_lines``: the baseline of just reading the text with Polars
  (``pl.scan_lines(...).select(len_bytes().sum())``);
* ``scan_fields`` (sacct only): Polars' own CSV reader splitting every line into its
  ``|``-separated string columns, each summed by length: the least work a Polars reader does
  to see the fields;
* ``write_table``: a floor, not a baseline: writing the finished job table (the ingest's own
  output, read back into memory first, untimed) as ingest writes it (zstd, the same level).
  ``write_table_share_of_bar_time`` is its seconds over the time the rows/s bar allows for
  the whole ingest.

Every child reports ``seconds`` (wall) and ``cpu_s`` (user + system time of all its threads,
``os.times``; the fair figure on a shared machine) of the measured call, and ``peak_rss_mb``
(``os.wait4``).
``ratio_*`` = ingest seconds / baseline seconds from the same run (``cpu_ratio_*`` the same
for CPU time). The bars of issue 2: sacct >= 1.5 M rows/s and <= 1 GB peak RSS, SWF >= 2 M
rows/s, ratio <= 2.5. Output: JSON (default ``benchmarks/results/ingest.json``) and one line
of text with the load average before and after. Wall figures taken while other work runs on
the machine are noisy; CPU seconds much less so.

Usage:
    python -m benchmarks.ingest [--sacct-repeat 15] [--swf-repeat 5] [--cache DIR] [--out FILE]
    python -m benchmarks.ingest --sacct-repeat 1 --swf-repeat 1     # a quick try (~1 min)
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmarks._common import DATA, RESULTS, TOOLS, TRACES

SWF2SACCT = TOOLS / "swf2sacct.py"
SACCT_SOURCE, SWF_SOURCE = TRACES["HPC2N"].file, TRACES["RICC"].file
RICC_PROCS = TRACES["RICC"].procs
"""The machine the SWF ingest is measured with (RICC's log has no header)."""

CHILD = """
import json, os, sys, time
import polars as pl
from hpcpolicy.ingest import IngestConfig, ingest
kind, path, out = sys.argv[1], sys.argv[2], sys.argv[3]
t, cpu = time.perf_counter(), os.times()
if kind == "ingest":
    fmt = sys.argv[4]
    cfg = IngestConfig(format=fmt, overwrite=True, procs=int(sys.argv[5]) if fmt == "swf" else None)
    r = ingest([path], out, cfg)
    result = {"rows": r.rows_read, "jobs_kept": r.jobs_kept, "rows_rejected": r.rows_rejected,
              "steps_folded": r.steps_folded, "timings_s": r.timings_s}
elif kind == "write_table":
    from hpcpolicy.ingest.pipeline import ZSTD_LEVEL
    df = pl.read_parquet(path)
    t, cpu = time.perf_counter(), os.times()
    df.write_parquet(out, compression="zstd", compression_level=ZSTD_LEVEL)
    result = {"rows": df.height}
elif kind == "scan_lines":
    n = pl.scan_lines(path).select(pl.col("line").str.len_bytes().sum()).collect()
    result = {"bytes": int(n.item())}
else:
    n = pl.scan_csv(path, separator="|", quote_char=None, infer_schema=False).select(
        pl.all().str.len_bytes().sum()).collect()
    result = {"columns": n.width}
result["seconds"] = time.perf_counter() - t
now = os.times()
result["cpu_s"] = round(now.user - cpu.user + now.system - cpu.system, 2)
print(json.dumps(result))
"""


BARS = {"sacct_rows_per_s": 1.5e6, "sacct_peak_rss_mb": 1024, "swf_rows_per_s": 2e6,
        "ratio": 2.5}
"""Issue 2's bars."""


def _child(kind: str, path: Path, out: Path, fmt: str = "") -> dict[str, Any]:
    """Run one measurement in a fresh interpreter; add its peak RSS (MiB)."""
    proc = subprocess.Popen([sys.executable, "-c", CHILD, kind, str(path), str(out), fmt,
                             str(RICC_PROCS)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stderr is not None
    stdout, stderr = proc.stdout.read(), proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise SystemExit(f"ingest benchmark: {kind} {path.name} failed:\n{stderr[-2000:]}")
    result: dict[str, Any] = json.loads(stdout.strip().splitlines()[-1])
    result["peak_rss_mb"] = round(usage.ru_maxrss / 1024, 1)  # Linux: KiB
    return result


def build_sacct(cache: Path, repeat: int) -> Path:
    """``swf2sacct --repeat`` over HPC2N, built once per size."""
    path = cache / f"hpc2n_x{repeat}.sacct.txt"
    if not path.exists():
        tmp = path.with_suffix(".part")
        subprocess.run([sys.executable, str(SWF2SACCT), str(DATA / SACCT_SOURCE), "-o", str(tmp),
                        "--repeat", str(repeat), "--gpus"], check=True, capture_output=True)
        tmp.replace(path)
    return path


def build_swf(cache: Path, repeat: int, source: str = SWF_SOURCE, name: str = "ricc",
              keep_header: bool = False) -> Path:
    """A trace repeated (RICC by default): each pass's job ids follow the last pass's, its
    submits its span. The header is the source's own with ``keep_header`` (its machine and
    start time), else the single line ``MaxProcs:`` :data:`RICC_PROCS` (what the SWF ingest
    was measured with)."""
    path = cache / f"{name}_x{repeat}.swf"
    if path.exists():
        return path
    with gzip.open(DATA / source, "rt") as f:
        lines = f.read().splitlines()
    rows = [ln.split() for ln in lines if ln.strip() and not ln.startswith(";")]
    header = [ln for ln in lines if ln.startswith(";")] if keep_header else \
        [f"; MaxProcs: {RICC_PROCS}"]
    max_id = max(int(r[0]) for r in rows)
    submits = [int(float(r[1])) for r in rows]
    span = max(submits) - min(submits) + 1
    tmp = path.with_suffix(".part")
    with tmp.open("w") as out:
        out.write("\n".join(header) + "\n")
        for k in range(repeat):
            for r in rows:
                shifted = [str(int(r[0]) + k * max_id), str(int(float(r[1])) + k * span), *r[2:]]
                out.write(" ".join(shifted) + "\n")
    tmp.replace(path)
    return path


def measure(path: Path, fmt: str, work: Path) -> dict[str, Any]:
    """Ingest and baselines for one input."""
    result: dict[str, Any] = {"input": str(path), "bytes": path.stat().st_size}
    result["scan_lines"] = _child("scan_lines", path, work / "x")
    if fmt == "sacct":
        result["scan_fields"] = _child("scan_fields", path, work / "x")
    run = _child("ingest", path, work / f"{fmt}.parquet", fmt)
    result["ingest"] = run
    result["rows_per_s"] = round(run["rows"] / run["seconds"])
    result["write_table"] = _child("write_table", work / f"{fmt}.parquet", work / "w.parquet")
    budget = run["rows"] / BARS[f"{fmt}_rows_per_s"]
    result["write_table_share_of_bar_time"] = round(result["write_table"]["seconds"] / budget, 2)
    for base in ("scan_lines", "scan_fields"):
        if base in result:
            result[f"ratio_{base}"] = round(run["seconds"] / result[base]["seconds"], 2)
            result[f"cpu_ratio_{base}"] = round(run["cpu_s"] / result[base]["cpu_s"], 2)
    return result


def main(argv: list[str] | None = None) -> int:
    """Build the inputs, run the measurements, write JSON and print one line."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sacct-repeat", type=int, default=15, help="HPC2N passes (15: 10.0 M lines)")
    p.add_argument("--swf-repeat", type=int, default=5, help="RICC passes (5: 2.24 M jobs)")
    p.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "hpcpolicy-bench",
                   help="where the large inputs are built and kept (outside the repository)")
    p.add_argument("--out", type=Path, default=RESULTS / "ingest.json")
    args = p.parse_args(argv)
    if min(args.sacct_repeat, args.swf_repeat) < 1:
        p.error("--sacct-repeat and --swf-repeat must be >= 1")
    for needed in (DATA / SACCT_SOURCE, DATA / SWF_SOURCE, SWF2SACCT):
        if not needed.exists():
            p.error(f"{needed} is absent (the real traces live in ../shared beside the repo)")
    args.cache.mkdir(parents=True, exist_ok=True)
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(dir=args.cache) as work:
        sacct = measure(build_sacct(args.cache, args.sacct_repeat), "sacct", Path(work))
        swf = measure(build_swf(args.cache, args.swf_repeat), "swf", Path(work))
    doc = {
        "sacct": sacct, "swf": swf,
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "platform": platform.platform(), "load_avg_1m_before": load_before,
                    "load_avg_1m": os.getloadavg()[0]},
        "bars": BARS,
    }
    from hpcpolicy.atomic import write_json

    write_json(args.out, doc)
    print(f"ingest: sacct {sacct['ingest']['rows']:,} rows "
          f"{sacct['rows_per_s'] / 1e6:.2f} M rows/s ({sacct['ingest']['cpu_s']} CPU-s) "
          f"peak {sacct['ingest']['peak_rss_mb']:.0f} MiB, x{sacct['ratio_scan_fields']} of a "
          f"Polars field scan (x{sacct['ratio_scan_lines']} of a line scan); swf "
          f"{swf['ingest']['rows']:,} rows {swf['rows_per_s'] / 1e6:.2f} M rows/s "
          f"({swf['ingest']['cpu_s']} CPU-s) peak {swf['ingest']['peak_rss_mb']:.0f} MiB, "
          f"x{swf['ratio_scan_lines']} of a line scan; writing the finished tables alone "
          f"takes {sacct['write_table_share_of_bar_time']:.0%} and "
          f"{swf['write_table_share_of_bar_time']:.0%} of the time the bars allow; "
          f"load {load_before:.1f} -> "
          f"{doc['machine']['load_avg_1m']:.1f} -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
