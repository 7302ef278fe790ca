"""Small random workloads for the environment, learned-policy, train and evaluate tests."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from benchmarks.builders.job_tables import job_table, write_job_table
from hpcpolicy.cluster import ClusterSpec
from hpcpolicy.workload import Workload

CORES = 32
CLUSTER = ClusterSpec.homogeneous(CORES)


def _columns(n: int, seed: int, cores: int) -> dict[str, np.ndarray]:
    """Overloaded, so that queues form: mean demand about twice the machine."""
    rng = np.random.default_rng(seed)
    procs = np.minimum(rng.geometric(0.15, n), cores)
    run = np.maximum(rng.lognormal(6.0, 1.5, n).astype(np.int64), 1)
    req = (run * rng.uniform(1.0, 3.0, n)).astype(np.int64) + 1
    gap = (procs * run).mean() / cores / 2.0
    submit = np.cumsum(rng.exponential(gap, n)).astype(np.int64)
    return {"submit": submit - submit[0], "run": run, "req": req, "procs": procs}


def random_workload(n: int = 300, seed: int = 0, cores: int = CORES) -> Workload:
    """``n`` random jobs, sorted by submit time, for a ``cores``-core machine."""
    c = _columns(n, seed, cores)
    z = np.zeros(n, dtype=np.int64)
    return Workload(job_id=np.array([str(i + 1) for i in range(n)], dtype=object),
                    submit=c["submit"], run_time=c["run"], req_walltime=c["req"],
                    procs=c["procs"], nodes=z, gpus=z, mem_mib=z,
                    user=(np.arange(n) % 5).astype(np.int32), partition=z.astype(np.int32),
                    logged_start=z - 1, users=tuple(f"u{i}" for i in range(5)),
                    partitions=("batch",))


def write_table(path: Path, n: int = 300, seed: int = 0, cores: int = CORES) -> Path:
    """The same jobs as :func:`random_workload`, as a job table with MaxProcs in its header."""
    c = _columns(n, seed, cores)
    rows = [{"submit": int(c["submit"][i]), "run_time_s": int(c["run"][i]),
             "req_cpus": int(c["procs"][i]), "req_walltime_s": int(c["req"][i]),
             "user": f"u{i % 5}", "partition": "batch"} for i in range(n)]
    return write_job_table(path, job_table(rows), [{"MaxProcs": cores}])
