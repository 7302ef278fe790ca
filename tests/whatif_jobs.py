"""A synthetic busy machine for the what-if tests: weeks of jobs with logged starts."""

from __future__ import annotations

import numpy as np

from hpcpolicy.workload import Workload

WEEK = 7 * 86400


def synthetic(n: int = 1500, weeks: int = 10, procs: int = 64, seed: int = 3) -> Workload:
    """A busy machine: Poisson arrivals over ``weeks``, heavy-tailed runs, 12 users."""
    rng = np.random.default_rng(seed)
    submit = np.sort(rng.integers(0, weeks * WEEK, n)).astype(np.int64)
    run = np.maximum(1, rng.lognormal(8.0, 1.6, n)).astype(np.int64)
    size = (2 ** rng.integers(0, 6, n)).astype(np.int64)
    req = (run * rng.uniform(1.0, 3.0, n)).astype(np.int64)
    z = np.zeros(n, dtype=np.int64)
    logged = submit + rng.integers(0, 7200, n)
    return Workload(job_id=np.array([str(i) for i in range(n)], dtype=object), submit=submit,
                    run_time=run, req_walltime=req, procs=size, nodes=z, gpus=z, mem_mib=z,
                    user=rng.integers(0, 12, n).astype(np.int32), partition=z.astype(np.int32),
                    logged_start=logged, users=tuple(f"u{i}" for i in range(12)),
                    partitions=("batch",), origin=1_000_000_000)
