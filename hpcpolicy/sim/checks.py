"""Invariants a finished schedule must satisfy (``SimConfig.check``, ``--check``).

Checked here, on the result, whatever engine produced it: every job that fits starts exactly
once and the others never; no job starts before its submit; no node group ever holds more
than its capacity of any resource; FCFS without backfilling starts jobs in submit order.
EASY's promise to the head (never started later than its reservation unless some job ran
past its requested walltime) is checked inside the engines, which know the reservations.
"""

from __future__ import annotations

import numpy as np

from hpcpolicy.cluster import ClusterSpec
from hpcpolicy.errors import SimulationError
from hpcpolicy.sim.allocation import RESOURCES
from hpcpolicy.sim.prepare import Prepared
from hpcpolicy.sim.types import SimConfig, SimResult
from hpcpolicy.workload import JobIds, Workload

__all__ = ["check_schedule"]


def _fail(msg: str) -> SimulationError:
    return SimulationError(f"invariant violated: {msg}")


def check_schedule(prep: Prepared, workload: Workload, cluster: ClusterSpec, cfg: SimConfig,
                   result: SimResult) -> None:
    """Raise :class:`SimulationError` naming the event, job and time of the first violation.

    Example:
        >>> import numpy as np
        >>> from hpcpolicy.sim import simulate
        >>> z = np.zeros(2, dtype=np.int64)
        >>> w = Workload(job_id=np.array(["a", "b"], dtype=object), submit=z,
        ...     run_time=np.array([10, 10]), req_walltime=np.array([10, 10]),
        ...     procs=np.array([3, 3]), nodes=z, gpus=z, mem_mib=z,
        ...     user=z.astype(np.int32), partition=z.astype(np.int32), logged_start=z - 1)
        >>> cl = ClusterSpec.homogeneous(4)
        >>> r = simulate(w, cl, SimConfig())
        >>> r.start[1] = 5      # tamper: both jobs now overlap on 4 cores
        >>> from hpcpolicy.sim.prepare import prepare
        >>> try:  # doctest: +ELLIPSIS
        ...     check_schedule(prepare(w, cl, SimConfig()), w, cl, SimConfig(), r)
        ... except SimulationError as err:
        ...     print(err)
        invariant violated: at t=5 s (start of job b) node group 'cpu' holds 6 cores, more ...
    """
    ids = workload.job_id
    start = result.start
    started = start >= 0
    missing = ~started & ~prep.never_fits
    if missing.any():
        j = int(np.flatnonzero(missing)[0])
        raise _fail(f"job {ids[j]} (submitted at t={int(prep.submit[j])} s) never started "
                    f"although it fits; {int(missing.sum())} such job(s)")
    wrong = started & prep.never_fits
    if wrong.any():
        j = int(np.flatnonzero(wrong)[0])
        raise _fail(f"job {ids[j]} started at t={int(start[j])} s although it can never fit")
    if result.stats.get("started", int(started.sum())) != int(started.sum()):
        raise _fail(f"the engine counted {result.stats['started']} starts for "
                    f"{int(started.sum())} started jobs: a job started twice")
    early = started & (start < prep.submit)
    if early.any():
        j = int(np.flatnonzero(early)[0])
        raise _fail(f"job {ids[j]} starts at t={int(start[j])} s, before its submit at "
                    f"t={int(prep.submit[j])} s")
    _check_capacity(prep, cluster, result, ids)
    if cfg.policy == "fcfs" and cfg.backfill == "none":
        idx = np.flatnonzero(started)
        back = np.flatnonzero(np.diff(start[idx]) < 0)
        if back.size:
            a, b = idx[back[0]], idx[back[0] + 1]
            raise _fail(f"FCFS without backfilling started job {ids[b]} at t={int(start[b])} s, "
                        f"before job {ids[a]} submitted earlier (started t={int(start[a])} s)")


def _check_capacity(prep: Prepared, cluster: ClusterSpec, result: SimResult,
                    ids: np.ndarray | JobIds) -> None:
    """Sweep starts and ends (ends first at equal times) and compare the load with capacity."""
    n = prep.n
    started = np.flatnonzero(result.start >= 0)
    g = np.concatenate([result.group[started], prep.pre_group])
    jobs = np.concatenate([started, np.arange(n, n + prep.m)])
    need = prep.need[jobs, g]                                   # (k, 4)
    t0 = np.concatenate([result.start[started], np.full(prep.m, np.iinfo(np.int64).min)])
    t1 = np.concatenate([result.end[started], prep.pre_end])
    times = np.concatenate([t1, t0])
    kind = np.concatenate([np.zeros(len(t1), np.int8), np.ones(len(t0), np.int8)])
    delta = np.concatenate([-need, need])
    who = np.concatenate([jobs, jobs])
    grp = np.concatenate([g, g])
    order = np.lexsort((kind, times))
    for gi in range(prep.capacity.shape[0]):
        sel = order[grp[order] == gi]
        load = np.cumsum(delta[sel], axis=0)
        over = load > prep.capacity[gi]
        if over.any():
            row, r = np.argwhere(over)[0]
            k = sel[row]
            j = int(who[k])
            name = str(ids[j]) if j < n else f"#{j - n} running at the start"
            raise _fail(f"at t={int(times[k])} s (start of job {name}) node group "
                        f"{cluster.groups[gi].name!r} holds {int(load[row, r])} "
                        f"{RESOURCES[r].replace('mem_mib', 'MiB')}, more than its "
                        f"{int(prep.capacity[gi, r])}")

