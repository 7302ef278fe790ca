"""What replaying outages costs: the compiled engine on HPC2N with and without them.

For FCFS with each backfilling mode (none, EASY, conservative), one process times, alternately
and ``--repeat`` times after a warm-up, the replay of the whole HPC2N trace (the engine alone,
as ``benchmarks/simulate.py``'s ``engine_s``):

* ``plain_s``: no outages (the code path every replay without a site model takes);
* ``outages_s``: with ``--outages`` random unplanned outages (seeded: 5-25 % of the cores,
  1-48 h each, spread over the trace), ``ratio`` = outages_s / plain_s (the issue's bar: at
  most 1.10).

With ``--base PATH`` (a checkout of the code before capacity over time, e.g. made with
``git worktree add PATH <commit>``), the same process shape times its plain replay too, in
turns with this tree's, and ``ratio_to_base`` = plain_s / base_s says what the unused feature
costs. Best of ``--repeat`` each. Output: JSON (default ``benchmarks/results/capacity.json``)
and one line of text.

Usage:
    python -m benchmarks.capacity [--repeat 5] [--outages 200] [--base /tmp/base]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmarks._common import RESULTS, ROOT
from benchmarks.simulate import ingest_traces

PROBE = """
import json, sys, time
import numpy as np
from hpcpolicy.sim import simulate
from hpcpolicy.sim.types import SimConfig
from hpcpolicy.world import open_world
table, backfill, count, repeat = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
world = open_world(table)
w, c = world.workload, world.cluster
cfgs = {"plain_s": SimConfig(policy="fcfs", backfill=backfill)}
if count:
    from hpcpolicy.sim.capacity import Outage
    rng = np.random.default_rng(42)
    cores = c.groups[0].count * c.groups[0].cores
    span = int(w.submit[-1])
    starts = np.sort(rng.integers(0, span, count))
    out = tuple(Outage(start=int(s), end=int(s + rng.integers(3600, 48 * 3600)),
                       cores=int(cores * rng.uniform(0.05, 0.25))) for s in starts)
    cfgs["outages_s"] = SimConfig(policy="fcfs", backfill=backfill, outages=out)
for cfg in cfgs.values():
    simulate(w.take(np.arange(1000)), c, cfg)  # compile or load, warm up
best = {k: float("inf") for k in cfgs}
for _ in range(repeat):
    for k, cfg in cfgs.items():
        t = time.perf_counter()
        simulate(w, c, cfg)
        best[k] = min(best[k], time.perf_counter() - t)
print(json.dumps({"jobs": len(w), **best}))
"""


def probe(tree: Path, table: Path, backfill: str, outages: int, repeat: int,
          timeout: float) -> dict[str, Any]:
    """Best engine times of one process running the code of ``tree``."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    done = subprocess.run([sys.executable, "-c", PROBE, str(table), backfill, str(outages),
                           str(repeat)], check=True, capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=tree)
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", type=Path,
                        default=Path(tempfile.gettempdir()) / "hpcpolicy-bench")
    parser.add_argument("--out", type=Path, default=RESULTS / "capacity.json")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--outages", type=int, default=200)
    parser.add_argument("--base", type=Path, default=None,
                        help="a checkout of the code before capacity over time")
    parser.add_argument("--timeout", type=float, default=900.0)
    args = parser.parse_args(argv)

    from hpcpolicy.atomic import write_json

    table = ingest_traces(args.cache)["HPC2N"]["full"]
    rows = []
    for backfill in ("none", "easy", "conservative"):
        row: dict[str, Any] = {"backfill": backfill,
                               **probe(ROOT, table, backfill, args.outages, args.repeat,
                                       args.timeout)}
        row["ratio"] = row["outages_s"] / row["plain_s"]
        if args.base is not None:
            row["base_s"] = probe(args.base, table, backfill, 0, args.repeat,
                                  args.timeout)["plain_s"]
            row["ratio_to_base"] = row["plain_s"] / row["base_s"]
        rows.append(row)
    write_json(args.out, {"trace": "HPC2N", "policy": "fcfs", "outages": args.outages,
                          "repeat": args.repeat, "cases": rows, "cpus": os.cpu_count()})
    parts = [f"{r['backfill']} plain {r['plain_s']:.3f}s, with outages {r['outages_s']:.3f}s "
             f"(x{r['ratio']:.3f})" + (f", base {r['base_s']:.3f}s (x{r['ratio_to_base']:.3f})"
                                      if "base_s" in r else "") for r in rows]
    print(f"HPC2N, {args.outages} outages: " + "; ".join(parts) + f" -> {args.out}")


if __name__ == "__main__":
    main()
