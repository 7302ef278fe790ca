"""Fuzz every ingest reader with mutated real lines, many more times than the default suite.

Each example is one log file: the header and some rows of a seed log, a few rows mutated
(``benchmarks/builders/reader_fuzz.py`` lists the mutations and the property, shared with the
tests). Seeds: the first 40 rows of
the real traces in ``../shared/data`` where present (``lublin_256.swf`` and
``KTH-SP2-1996-2.1-cln.swf.gz`` for SWF, ``genomique-2026-sacct-format-all.csv`` and
``kabre-2024-sacct.csv`` for sacct, ``openb_pod_list_default.csv`` for Alibaba), else and
besides the fixtures in ``tests/data`` (the only seeds of Helios and Philly). Examples are
shared equally between readers, and between the seeds of a reader.

A failing example does not stop the run: its reader, exception and first bytes are recorded.
Output: JSON (default ``benchmarks/results/fuzz_readers.json``) with examples tried, files
read and refused (one-line errors) and failures per reader, and one line of text. Exit 1 when
any example failed.

    python -m benchmarks.fuzz_readers --examples 10000 --seed 1
    python -m benchmarks.fuzz_readers --reader sacct --examples 2000   # one reader
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import traceback
from collections import Counter
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st

from benchmarks._common import DATA, OPENB_PODS, RESULTS, TRACES
from benchmarks.builders.reader_fuzz import FIXTURES, Seed, check_ingest, mutated_log, seed_from

REAL = {
    "swf": [TRACES["lublin_256"].file, TRACES["KTH-SP2"].file],
    "sacct": [TRACES["Genomique"].file, TRACES["Kabre"].file],
    "alibaba": [OPENB_PODS],
}


def seeds(fmt: str) -> list[tuple[str, Seed]]:
    """The fixture and the real traces present, as (name, seed)."""
    found = [(FIXTURES[fmt].name, seed_from(fmt, FIXTURES[fmt]))]
    for name in REAL.get(fmt, []):
        if (DATA / name).exists():
            found.append((name, seed_from(fmt, DATA / name)))
    return found


def fuzz(fmt: str, name: str, log: Seed, examples: int, rng_seed: int) -> dict[str, object]:
    """Run ``examples`` mutated logs of ``log`` through the reader; count the outcomes."""
    folder = Path(tempfile.mkdtemp(prefix=f"fuzz-{fmt}-"))
    outcomes: Counter[str] = Counter()
    failures: list[dict[str, str]] = []

    @hypothesis_seed(rng_seed)
    @settings(max_examples=examples, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(st.data())
    def run(data: st.DataObject) -> None:
        content = data.draw(mutated_log(log))
        try:
            outcomes[check_ingest(fmt, content, folder)] += 1
        except Exception as exc:  # recorded, not raised: the run goes on
            outcomes["failed"] += 1
            if len(failures) < 20:
                failures.append({"error": f"{type(exc).__name__}: {exc}"[:300],
                                 "where": traceback.format_exc().splitlines()[-3][:200],
                                 "input_head": content[:400].decode("utf-8", "replace")})

    start = time.perf_counter()
    run()
    return {"reader": fmt, "seed_log": name, "rows_in_seed": len(log.rows),
            "examples": sum(outcomes.values()), "read": outcomes["read"],
            "refused_one_line": outcomes["refused"], "failed": outcomes["failed"],
            "seconds": round(time.perf_counter() - start, 1), "failures": failures}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=int, default=10_000, help="examples in all")
    parser.add_argument("--reader", choices=sorted(FIXTURES), action="append",
                        help="only these readers (repeat); default all")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path, default=RESULTS / "fuzz_readers.json")
    args = parser.parse_args(argv)
    readers = args.reader or sorted(FIXTURES)
    results = []
    for fmt in readers:
        found = seeds(fmt)
        for name, log in found:
            n = -(-args.examples // (len(readers) * len(found)))  # at least --examples in all
            results.append(fuzz(fmt, name, log, n, args.seed))
            r = results[-1]
            print(f"  {fmt} / {name}: {r['examples']} examples, {r['read']} read, "
                  f"{r['refused_one_line']} refused, {r['failed']} failed, {r['seconds']} s",
                  file=sys.stderr)
    total = {k: sum(int(r[k]) for r in results)  # type: ignore[call-overload]
             for k in ("examples", "read", "refused_one_line", "failed")}
    doc = {"benchmark": "fuzz_readers", "seed": args.seed, "total": total, "runs": results,
           "load_avg_end": os.getloadavg()}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=2) + "\n")
    print(f"fuzz_readers: {total['examples']} examples over {', '.join(readers)}: "
          f"{total['read']} read, {total['refused_one_line']} refused with one line, "
          f"{total['failed']} failed -> {args.out}")
    return 1 if total["failed"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
