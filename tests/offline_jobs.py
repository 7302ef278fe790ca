"""Job tables with logged start times for the offline-RL tests: a random workload whose
"log" is the simulator's own schedule (so the logged decisions are known exactly)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
from env_jobs import CLUSTER, random_workload

from benchmarks.builders.job_tables import job_table, write_job_table
from hpcpolicy.sim.engine import simulate
from hpcpolicy.sim.types import SimConfig
from hpcpolicy.workload import Workload


def logged_workload(n: int = 300, seed: int = 0, policy: str = "fcfs",
                    backfill: str = "none") -> Workload:
    """:func:`random_workload` with ``logged_start`` = the simulator's schedule of all of it."""
    w = random_workload(n, seed)
    start = simulate(w, CLUSTER, SimConfig(policy=policy, backfill=backfill)).start
    return dataclasses.replace(w, logged_start=np.asarray(start, dtype=np.int64))


def write_logged_table(path: Path, n: int = 300, seed: int = 0) -> Path:
    """:func:`logged_workload` (FCFS + EASY) as a job table with waits and MaxProcs."""
    w = logged_workload(n, seed, backfill="easy")
    rows = [{"submit": int(w.submit[i]), "wait": int(w.logged_start[i] - w.submit[i]),
             "run_time_s": int(w.run_time[i]), "req_cpus": int(w.procs[i]),
             "req_walltime_s": int(w.req_walltime[i]), "user": f"u{i % 5}",
             "partition": "batch"} for i in range(n)]
    return write_job_table(path, job_table(rows), [{"MaxProcs": CLUSTER.total_cores}])
