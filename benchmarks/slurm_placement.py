"""Check the Slurm flavour's node choice (:func:`hpcpolicy.slurm.replay.place`) against
where the test Slurm put each job: the ``NodeList`` column of its sacct log.

    python -m benchmarks.slurm_placement --log-dir DIR [--json out.json]

DIR holds the ``sacct.txt`` of a run of ``benchmarks/slurm_replay.py`` (4 nodes n1-n4 of 16
cores, partitions as that script's ``NODES``). Each job's placement is replayed on the state
rebuilt from the log: the jobs started before it (or in the same second, earlier in the log)
and not yet ended, on their logged nodes (a several-node job's cores split on them as
``place`` splits them). A job that ended in the second the job started may or may not have
freed its cores by then, so the state is built both ways; a one-node job counts where both
give the same node ("unambiguous"). Printed: the one-node agreement, also for a plain best
fit over nodes (the fullest node that holds the job), and each several-node job's real and
chosen nodes.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import polars as pl

from benchmarks.slurm_replay import NODES, read_log
from hpcpolicy.slurm.replay import place
from hpcpolicy.workload import Workload

I64 = npt.NDArray[np.int64]
CORES, HOSTS = 16, 4


def _node_indices(node_list: str) -> list[int]:
    """``n3`` -> [2]; ``n[1-2]`` -> [0, 1]; ``n[1,3-4]`` -> [0, 2, 3]."""
    one = re.fullmatch(r"n(\d+)", node_list)
    if one:
        return [int(one[1]) - 1]
    many = re.fullmatch(r"n\[([\d,-]+)\]", node_list)
    if not many:
        raise SystemExit(f"NodeList {node_list!r} is not of the test cluster's n1-n4")
    out: list[int] = []
    for part in many[1].split(","):
        lo, _, hi = part.partition("-")
        out += range(int(lo) - 1, int(hi or lo))
    return out


def _best_fit(free: I64, allowed: tuple[int, ...], cores: int) -> int | None:
    """The fullest node of ``allowed`` that holds ``cores`` (the rule ``place`` replaced)."""
    fits = [n for n in allowed if free[n] >= cores]
    return min(fits, key=lambda n: (free[n], n)) if fits else None


def check(w: Workload, node_lists: list[str]) -> dict[str, Any]:
    """Agreement of ``place`` with the logged nodes (see the module docstring)."""
    real = [_node_indices(s) for s in node_lists]
    start = np.asarray(w.logged_start, dtype=np.int64)
    end = start + np.asarray(w.run_time, dtype=np.int64)
    order = np.lexsort((np.arange(len(w)), start))
    alloc: dict[int, dict[int, int]] = {}

    def free_at(j: int, ended_in_second: bool) -> I64:
        free = np.full(HOSTS, CORES, dtype=np.int64)
        for k, cores in alloc.items():
            if end[k] > start[j] or (end[k] == start[j] and not ended_in_second):
                for n, c in cores.items():
                    free[n] -= c
        return free

    one = {"unambiguous": 0, "agree": 0, "agree_best_fit": 0, "ambiguous": 0}
    several: list[dict[str, Any]] = []
    for j in map(int, order):
        cores, allowed = int(w.procs[j]), tuple(NODES[w.partitions[w.partition[j]]])
        states = [free_at(j, b) for b in (True, False)]
        if len(real[j]) == 1:
            chosen = [place(f, allowed, cores, 1) for f in states]
            picks = [next(iter(c)) if c else None for c in chosen]
            if picks[0] != picks[1]:
                one["ambiguous"] += 1
            else:
                one["unambiguous"] += 1
                one["agree"] += picks[0] == real[j][0]
                one["agree_best_fit"] += _best_fit(states[0], allowed, cores) == real[j][0]
        else:
            several.append({
                "job": str(w.job_id[j]), "cores": cores, "real": real[j],
                "chosen": [sorted(c) if c else None
                           for c in (place(f, allowed, cores, len(real[j])) for f in states)]})
        split = place(states[0], real[j], cores, len(real[j]))
        alloc[j] = split or {n: cores // len(real[j]) for n in real[j]}
    return {"one_node": one, "several_nodes": several}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--log-dir", type=Path, required=True)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    if not (args.log_dir / "sacct.txt").exists():
        raise SystemExit(f"{args.log_dir}: no sacct.txt; run python -m benchmarks.slurm_replay "
                         "first")
    w, _ = read_log(args.log_dir)
    table = pl.read_parquet(args.log_dir / "jobs.parquet", columns=["job_id", "node_list"])
    where = dict(zip(table["job_id"].to_list(), table["node_list"].to_list(), strict=True))
    out = {"log": str(args.log_dir / "sacct.txt"),
           **check(w, [where[str(w.job_id[k])] for k in range(len(w))])}
    if args.json:
        args.json.write_text(json.dumps(out, indent=2) + "\n")
    one = out["one_node"]
    print(f"one-node jobs: {one['agree']} of {one['unambiguous']} unambiguous placements "
          f"agree (best fit over nodes: {one['agree_best_fit']}), {one['ambiguous']} ambiguous")
    for job in out["several_nodes"]:
        print(f"job {job['job']} ({job['cores']} cores): real {job['real']}, "
              f"chosen {job['chosen'][0]} / {job['chosen'][1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
