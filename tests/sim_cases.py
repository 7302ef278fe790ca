"""Workload builders and hypothesis strategies shared by the simulator tests."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from hypothesis import strategies as st

from hpcpolicy.cluster import ClusterSpec, NodeGroup
from hpcpolicy.sim.types import RunningJobs
from hpcpolicy.workload import Workload

__all__ = ["clusters", "job_lists", "running_jobs", "workload"]


def workload(jobs: Sequence[Sequence[int]], *, n_users: int = 1) -> Workload:
    """Jobs given as (submit, run, req, procs[, user[, gpus]]) tuples, named a, b, c, ...

    Example:
        >>> workload([(0, 10, 10, 4)]).procs.tolist()
        [4]
    """
    rows = [tuple(j) + (0,) * (6 - len(j)) for j in jobs]
    cols = np.array(rows, dtype=np.int64).reshape(len(rows), 6).T
    n = len(rows)
    z = np.zeros(n, dtype=np.int64)
    names = [chr(ord("a") + i) if i < 26 else f"j{i}" for i in range(n)]
    return Workload(job_id=np.array(names, dtype=object), submit=cols[0], run_time=cols[1],
                    req_walltime=cols[2], procs=cols[3], nodes=z, gpus=cols[5], mem_mib=z,
                    user=cols[4].astype(np.int32), partition=z.astype(np.int32),
                    logged_start=z - 1, users=tuple(f"u{i}" for i in range(n_users)))


@st.composite
def job_lists(draw: st.DrawFn, max_jobs: int = 20, max_procs: int = 9,
              gpus: bool = False) -> Workload:
    """Random small workloads: bursts of submits, zero-length jobs, under- and
    over-estimated walltimes, a few jobs too big for small machines, three users."""
    n = draw(st.integers(1, max_jobs))
    submits = sorted(draw(st.lists(st.integers(0, 120), min_size=n, max_size=n)))
    jobs = []
    for s in submits:
        run = draw(st.integers(0, 60))
        req = max(0, run + draw(st.integers(-20, 40)))
        procs = draw(st.integers(1, max_procs))
        user = draw(st.integers(0, 2))
        g = draw(st.integers(0, 3)) if gpus else 0
        jobs.append((s, run, req, procs, user, g))
    return workload(jobs, n_users=3)


def clusters() -> st.SearchStrategy[ClusterSpec]:
    """One homogeneous machine of 1-8 cores, or two node groups (the second with GPUs)."""
    return st.one_of(
        st.integers(1, 8).map(ClusterSpec.homogeneous),
        st.just(ClusterSpec((NodeGroup("cpu", 2, 4), NodeGroup("gpu", 1, 8, gpus=4)))),
    )


@st.composite
def running_jobs(draw: st.DrawFn, cluster: ClusterSpec, exclusive: bool = False) -> RunningJobs:
    """Jobs occupying part of the first node group at the start (whole nodes under
    ``exclusive``), some already past their requested end."""
    per_node = cluster.groups[0].cores
    free = cluster.groups[0].count * per_node
    procs, ends, req_ends = [], [], []
    for _ in range(draw(st.integers(0, 3))):
        if free == 0:
            break
        p = draw(st.integers(1, free))
        free -= -(-p // per_node) * per_node if exclusive else p
        procs.append(p)
        end = draw(st.integers(1, 150))
        ends.append(end)
        req_ends.append(max(0, end + draw(st.integers(-40, 40))))
    z = np.zeros(len(procs), dtype=np.int64)
    return RunningJobs(procs=np.array(procs, dtype=np.int64), nodes=z, gpus=z,
                       end=np.array(ends, dtype=np.int64),
                       req_end=np.array(req_ends, dtype=np.int64))
