"""What every engine needs before the first event: checked inputs, demands, run lengths.

:func:`prepare` validates the workload (naming the offending jobs), applies the kill option,
computes the demand table with the allocator and places the jobs already running at a warm
start. The result is shared by the reference engine, the compiled engine and the RLScheduler
compatibility engine, so they start from identical data.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from hpcpolicy.cluster import ClusterSpec
from hpcpolicy.errors import ConfigError
from hpcpolicy.sim.allocation import CORES, get_allocator
from hpcpolicy.sim.capacity import changes
from hpcpolicy.sim.types import RunningJobs, SimConfig
from hpcpolicy.workload import Workload

__all__ = ["OTHERS", "Prepared", "prepare"]

I64 = npt.NDArray[np.int64]


@dataclass(frozen=True)
class Prepared:
    """Engine inputs derived from (workload, cluster, config, running jobs)."""

    n: int
    """Jobs in the workload."""
    m: int
    """Jobs running at the start (indices n .. n + m - 1 in the per-job arrays below)."""
    submit: I64
    """(n,) submit times."""
    req: I64
    """(n,) requested walltimes as given (the RLScheduler engine plans with these)."""
    dur: I64
    """(n,) how long each job really runs (the logged run time, cut at the request under
    ``kill_at_limit``)."""
    length: I64
    """(n,) how long planning expects each job to run: max(requested walltime, 1)."""
    killed: npt.NDArray[np.bool_]
    """(n,) jobs that ``kill_at_limit`` cuts short."""
    need: I64
    """(n + m, groups, 4) demand table (see :class:`hpcpolicy.sim.allocation.Demands`)."""
    capacity: I64
    """(groups, 4) cluster totals."""
    never_fits: npt.NDArray[np.bool_]
    """(n,) jobs no group can ever hold."""
    user: I64
    """(n,) user codes."""
    n_users: int
    """Number of users (for equal fair shares)."""
    pre_end: I64
    """(m,) actual ends of the running jobs."""
    pre_req_end: I64
    """(m,) requested ends of the running jobs."""
    pre_group: I64
    """(m,) the group each running job occupies."""
    free0: I64
    """(groups, 4) free resources at the start."""
    cap: I64
    """(6, K) capacity changes over time (:func:`hpcpolicy.sim.capacity.changes`)."""


def i64(a: npt.ArrayLike) -> I64:
    """A contiguous int64 copy (or view) of ``a``."""
    return np.ascontiguousarray(a, dtype=np.int64)


def _bad(ids: npt.NDArray[np.object_], mask: npt.NDArray[np.bool_]) -> str:
    shown = ", ".join(str(x) for x in ids[mask][:5])
    more = int(mask.sum()) - 5
    return shown + (f" and {more} more" if more > 0 else "")


def _validate(w: Workload) -> None:
    n = len(w)
    if n == 0:
        raise ConfigError("the workload has no jobs; nothing to simulate (check the job table "
                          "and the drop counts of `hpcpolicy simulate`)")
    for name in ("job_id", "run_time", "req_walltime", "procs", "nodes", "gpus", "mem_mib",
                 "user", "partition", "logged_start"):
        if len(getattr(w, name)) != n:
            raise ConfigError(f"workload column {name} has {len(getattr(w, name))} entries, "
                              f"submit has {n}")
    if (np.diff(w.submit) < 0).any():
        first = int(np.argmax(np.diff(w.submit) < 0)) + 1
        raise ConfigError(f"workload is not sorted by submit time (job {w.job_id[first]} "
                          "comes after a later submit); build it with Workload.from_table")
    for name in ("run_time", "req_walltime", "procs", "nodes", "gpus", "mem_mib"):
        bad = np.asarray(getattr(w, name)) < 0
        if bad.any():
            ids = np.asarray(w.job_id, dtype=object)
            raise ConfigError(f"workload column {name} is negative for job(s) {_bad(ids, bad)}; "
                              "resolve unknown values when building the workload")


OTHERS = "*"
"""In ``SimConfig.pools``, the partitions not named there."""


def _confine(need: I64, never: npt.NDArray[np.bool_], w: Workload, cluster: ClusterSpec,
             pools: tuple[tuple[str, tuple[str, ...]], ...]) -> None:
    """Keep each pooled partition's jobs in its own node groups (in place): -1 elsewhere."""
    names = [g.name for g in cluster.groups]
    for partition, groups in pools:
        unknown = sorted(set(groups) - set(names))
        if unknown:
            raise ConfigError(f"pool of partition {partition!r} names node group(s) "
                              f"{', '.join(unknown)} that cluster {cluster.name!r} lacks "
                              f"(it has {', '.join(names)})")
        if partition == OTHERS:
            listed = [w.partitions.index(p) for p, _ in pools if p in w.partitions]
            jobs = np.flatnonzero(~np.isin(np.asarray(w.partition), listed))
        elif partition in w.partitions:
            jobs = np.flatnonzero(np.asarray(w.partition) == w.partitions.index(partition))
        else:
            continue
        outside = np.array([i for i, name in enumerate(names) if name not in groups],
                           dtype=np.int64)
        if len(jobs) and len(outside):
            need[np.ix_(jobs, outside)] = -1
    never[:len(w)] |= (need[:len(w), :, 0] < 0).all(axis=1)


def prepare(workload: Workload, cluster: ClusterSpec, cfg: SimConfig,
            running: RunningJobs | None = None) -> Prepared:
    """Check the inputs and derive the engines' arrays.

    Raises:
        ConfigError: an empty or unsorted workload, negative values (naming the jobs), or
            running jobs that do not fit on the cluster.
    """
    _validate(workload)
    running = running if running is not None else RunningJobs.empty()
    allocator = get_allocator(cfg.allocator)
    w = workload
    n, m = len(w), len(running)
    run, req = i64(w.run_time), i64(w.req_walltime)
    killed = (run > req) if cfg.kill_at_limit else np.zeros(n, dtype=bool)
    dur = np.where(killed, req, run).astype(np.int64)
    mem_pre = running.mem_mib if running.mem_mib is not None else np.zeros(m, dtype=np.int64)
    def both(queued: npt.ArrayLike, pre: npt.ArrayLike) -> I64:  # no copy without running jobs
        return i64(queued) if m == 0 else np.concatenate([i64(queued), i64(pre)])

    dem = allocator.demands(both(w.procs, running.procs), both(w.nodes, running.nodes),
                            both(w.gpus, running.gpus), both(w.mem_mib, mem_pre),
                            cluster, exclusive=cfg.exclusive_nodes)
    if cfg.pools:
        _confine(dem.need, dem.never_fits, w, cluster, cfg.pools)
    free = dem.capacity.copy()
    pre_group = np.empty(m, dtype=np.int64)
    for i in range(m):
        g = allocator.pick(dem.need[n + i], free)
        if g < 0:
            raise ConfigError(
                f"running job {i} ({int(running.procs[i])} procs, {int(running.gpus[i])} GPUs) "
                f"does not fit on cluster {cluster.name!r} beside the {i} before it "
                f"({int(free[:, CORES].sum())} cores free); check the warm-start jobs")
        free[g] -= dem.need[n + i, g]
        pre_group[i] = g
    user = i64(w.user)
    return Prepared(
        n=n, m=m, submit=i64(w.submit), req=req, dur=dur, length=np.maximum(req, 1),
        killed=killed, need=np.ascontiguousarray(dem.need), capacity=dem.capacity,
        never_fits=dem.never_fits[:n].copy(), user=user,
        n_users=max(len(w.users), int(user.max(initial=-1)) + 1, 1),
        pre_end=i64(running.end), pre_req_end=i64(running.req_end), pre_group=pre_group,
        free0=free, cap=changes(cluster, cfg.outages),
    )
