"""Two runs writing one output at once, and reads of a job table while it is replaced
(issue 38, part 4): the bars are 0 mixed sets and 0 vanished results in 400 rounds of two
concurrent writers, and 0 tracebacks in 100 reads during replacements.

* ``--rounds`` rounds, twice: two processes start writing the same new three-file set at the
  same instant, first as runs without ``--overwrite`` (claim and look, then write: one must be
  refused, and the other's set must be the one there), then as runs with it (both may write;
  the set must be one run's whole). Each rename is made 1 ms slower, so that two commits at
  once overlap. Litter (lock, journal, temporary files) left once both are done is counted.
* ``--reads`` profiles (``hpcpolicy stats``'s reading) of a job table while another process
  keeps renaming one of two versions over it (300 and 500 jobs); a profile whose job and user
  counts come from different versions is ``mixed``.

The rounds are in ``benchmarks/builders/output_races.py`` (shared with
tests/test_outputs_together.py); the default test suite runs a few of them.
Output: JSON (default ``benchmarks/results/concurrent_outputs.json``) and one line of text;
exit 1 when a bar is missed.

    python -m benchmarks.concurrent_outputs                 # 400 rounds, 100 reads
    python -m benchmarks.concurrent_outputs --rounds 40 --reads 20
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import tempfile
import time
from pathlib import Path

from benchmarks._common import RESULTS
from benchmarks.builders.output_races import read_races, write_races


def main(argv: list[str] | None = None) -> int:
    """Run the races; print one line; return 1 if a bar is missed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=400)
    parser.add_argument("--reads", type=int, default=100)
    parser.add_argument("--out", type=Path,
                        default=RESULTS / "concurrent_outputs.json")
    args = parser.parse_args(argv)
    doc: dict[str, object] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for overwrite in (False, True):
            folder = Path(tmp) / f"write-{overwrite}"
            folder.mkdir()
            tic = time.perf_counter()
            races = write_races(folder, args.rounds, overwrite=overwrite)
            doc[f"writers{'_overwrite' if overwrite else ''}"] = {
                **dataclasses.asdict(races), "errors": races.errors[:5],
                "error_count": len(races.errors), "wall_s": round(time.perf_counter() - tic, 1)}
        folder = Path(tmp) / "read"
        folder.mkdir()
        tic = time.perf_counter()
        reads = read_races(folder, args.reads)
        doc["reads"] = {**dataclasses.asdict(reads), "errors": reads.errors[:5],
                        "error_count": len(reads.errors),
                        "wall_s": round(time.perf_counter() - tic, 1)}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    w, o, r = doc["writers"], doc["writers_overwrite"], doc["reads"]
    assert isinstance(w, dict) and isinstance(o, dict) and isinstance(r, dict)
    print(f"{args.rounds} rounds without --overwrite: {w['mixed']} mixed, {w['vanished']} "
          f"vanished, {w['refused']} refused, {w['litter']} litter, {w['error_count']} errors; "
          f"with it: {o['mixed']} mixed, {o['litter']} litter, {o['error_count']} errors; "
          f"{args.reads} reads over {r['replacements']} replacements: {r['error_count']} "
          f"tracebacks, {r['mixed']} mixed; {args.out}")
    missed = (w["mixed"] + w["vanished"] + w["litter"] + w["error_count"] + o["mixed"]
              + o["litter"] + o["error_count"] + r["error_count"] + r["mixed"])
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
