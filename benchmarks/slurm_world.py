"""The Slurm world's speed (issue 40, speed bar): a 1 M-job log replayed under a multifactor
Slurm configuration in at most 3 x the time of the plain EASY replay of the same log.

The log: HPC2N (202,871 jobs, 120 dual-core nodes) ``--repeat`` times over (5: 1.01 M jobs),
each pass's submits after the last pass's span. The configuration: HPC2N's 120 nodes of 2
CPUs in one partition, ``priority/multifactor`` with age, Fair Tree fair share and job size
weighted, PriorityCalcPeriod 5 min, ``sched/backfill`` at Slurm's defaults (bf_interval 30,
bf_window 1 day, bf_max_job_test 500, default_queue_depth 100). Every user has one share
(HPC2N's log names no accounts).

Measured in one process, each the best of ``--runs`` alternated runs after a warm-up (JIT)
call on the first 2,000 jobs, in CPU seconds of the process (``time.process_time``):
``easy_s``, :func:`hpcpolicy.sim.simulate` with ``fcfs`` + ``easy`` on the pooled machine;
``world_s``, :func:`hpcpolicy.world.slurm.replay`; and ``build_s``, building the world once
(:func:`~hpcpolicy.world.slurm.slurm_world`). The ratio ``world / easy`` is the bar.
Output: JSON (default ``benchmarks/results/slurm_world.json``) and one line of text.

Usage:
    python -m benchmarks.slurm_world [--repeat 5] [--runs 3] [--out FILE]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks._common import RESULTS, ingest_trace
from hpcpolicy.cluster import ClusterSpec
from hpcpolicy.workload import Workload

CONF = """PriorityType=priority/multifactor
PriorityWeightAge=1000
PriorityWeightFairshare=10000
PriorityWeightJobSize=1000
PriorityMaxAge=7-0
PriorityDecayHalfLife=7-0
SchedulerType=sched/backfill
NodeName=n[001-{nodes}] CPUs={cpus}
PartitionName=batch Nodes=ALL Default=YES MaxTime=INFINITE
"""
"""The Slurm configuration replayed (HPC2N's machine, Slurm's default scheduler knobs)."""


def tiled(w: Workload, k: int) -> Workload:
    """``w``'s jobs ``k`` times, each pass's submits after the last pass's span."""
    span = int(w.submit.max()) + 1
    index = np.tile(np.arange(len(w)), k)
    out = w.take(index)
    shift = np.repeat(np.arange(k, dtype=np.int64) * span, len(w))
    return replace(out, submit=out.submit + shift,
                   job_id=np.array([f"{p}.{j}" for p, j in
                                    zip(np.repeat(np.arange(k), len(w)), index, strict=True)],
                                   dtype=object))


def measure(w: Workload, cluster: ClusterSpec, conf_path: Path, runs: int) -> dict[str, Any]:
    """Time the EASY replay and the Slurm world on ``w`` (best of ``runs``)."""
    from hpcpolicy.sim import simulate
    from hpcpolicy.sim.types import SimConfig
    from hpcpolicy.slurmconf import read_slurm_conf
    from hpcpolicy.world.slurm import replay, slurm_world

    cfg = SimConfig(policy="fcfs", backfill="easy")
    t = time.process_time()
    world = slurm_world(read_slurm_conf(conf_path), w)
    build = time.process_time() - t
    spent: dict[str, list[float]] = {"easy": [], "world": []}
    result = None
    for _ in range(runs):
        t = time.process_time()
        simulate(w, cluster, cfg)
        spent["easy"].append(time.process_time() - t)
        t = time.process_time()
        result = replay(w, world)
        spent["world"].append(time.process_time() - t)
    best = {k: min(v) for k, v in spent.items()}
    assert result is not None
    started = result.start >= 0
    return {"jobs": len(w), "build_s": round(build, 3),
            **{f"{k}_s": round(v, 3) for k, v in best.items()},
            "world_over_easy": round(best["world"] / best["easy"], 2),
            "started": int(started.sum()),
            "mean_wait_s": round(float((result.start - w.submit)[started].mean()), 1),
            "counters": {k: v for k, v in result.stats.items() if k != "wall_s"}}


def main(argv: list[str] | None = None) -> None:
    """Build the log and the world, time both replays, write JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="HPC2N passes (5: 1.01 M jobs)")
    parser.add_argument("--runs", type=int, default=3, help="timed runs of each, best kept")
    parser.add_argument("--jobs", type=int, default=0,
                        help="keep only the first JOBS jobs of HPC2N (0: all; smoke runs)")
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) /
                        "hpcpolicy-bench")
    parser.add_argument("--out", type=Path, default=RESULTS / "slurm_world.json")
    args = parser.parse_args(argv)
    from hpcpolicy.atomic import write_json
    from hpcpolicy.world import open_world

    world = open_world(ingest_trace("HPC2N", args.cache))
    cluster, base = world.cluster, world.workload
    if args.jobs:
        base = base.take(np.arange(min(args.jobs, len(base))))
    # one partition for the whole log (HPC2N's SWF names queues the configuration lacks)
    base = replace(base, partition=np.zeros(len(base), dtype=np.int32), partitions=("(none)",))
    nodes = 120
    conf = Path(tempfile.mkdtemp(dir=args.cache)) / "slurm.conf"
    conf.write_text(CONF.format(nodes=nodes, cpus=cluster.total_cores // nodes))
    warm = base.take(np.arange(min(2000, len(base))))
    measure(warm, cluster, conf, 1)  # compile first
    big = tiled(base, args.repeat)
    case = measure(big, cluster, conf, args.runs)
    given = sys.argv[1:] if argv is None else argv
    doc = {"command": " ".join(["python -m benchmarks.slurm_world", *given]),
           "slurm_conf": conf.read_text(), "bar_world_over_easy": 3.0,
           f"HPC2N x{args.repeat}": case, "cpus": os.cpu_count(),
           "load_avg_1m": os.getloadavg()[0]}
    write_json(args.out, doc)
    print(f"HPC2N x{args.repeat} ({case['jobs']:,} jobs): EASY {case['easy_s']} s, Slurm world "
          f"{case['world_s']} s (build {case['build_s']} s): {case['world_over_easy']} x "
          f"(bar 3) -> {args.out}")


if __name__ == "__main__":
    main()
