"""What the logged schedule itself shows about the site, without replaying it.

Each function reads the jobs' logged starts and run times (the schedule the real scheduler
produced) and returns a candidate element with its evidence in words; :mod:`calibrate`
then keeps a candidate only where a replay with it fits the log better.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from numba import njit

from hpcpolicy.workload import Workload
from hpcpolicy.world.site_model import Outage, Pool, merge_outages

__all__ = ["Candidate", "dated_outages", "find_limits", "find_machine_size", "find_node_size",
           "find_outages", "find_pools", "idle_level", "running_peaks"]

I64 = npt.NDArray[np.int64]

CEILING_USERS = 3
"""Fewest users who must reach the same running ceiling for it to count as a limit."""
CEILING_SHARE = 0.95
"""Peaks within this share of the highest count as reaching the same ceiling (a log's
accounting can overshoot a limit by a job at its edges)."""
MACHINE_SHARE = 0.8
"""A per-user core ceiling at or above this share of the machine is not taken for a limit."""
OVER_SHARE = 0.01
"""Share of the logged time the log must run more cores than the machine has before the
machine is taken to be larger (a shorter excess is an accounting glitch at job edges)."""
POOL_MIN_JOBS = 50
"""Fewest logged jobs of a partition for its peak use to size a pool."""
MAX_OUTAGES = 50
"""Most outage intervals kept (the largest in cores x length)."""
MIN_OUTAGE_SHARE = 0.02
"""Smallest outage kept, as a share of the machine's cores."""
OUTAGE_GAP_S = 3600
"""Outages less than this apart are merged into one."""


@dataclass(frozen=True)
class Candidate:
    """A candidate element's values and the evidence for them."""

    values: dict[str, Any]
    """SiteModel fields it sets."""
    evidence: str
    """Why, in words."""


def _logged(w: Workload, upto: int) -> npt.NDArray[np.bool_]:
    mask = np.zeros(len(w), dtype=bool)
    mask[:upto] = w.logged_start[:upto] >= 0
    return mask


def running_peaks(key: I64, start: I64, end: I64, amount: I64) -> tuple[I64, I64]:
    """Per key (user, partition): the most ``amount`` running at once, and how long (s) the
    key spent at that peak. Ends free before starts at the same time."""
    n_keys = int(key.max(initial=-1)) + 1
    t = np.concatenate((start, end))
    d = np.concatenate((amount, -amount))
    k = np.concatenate((key, key))
    order = np.lexsort((d, t, k))  # by key, time, ends (negative) first
    peak, held = _peaks(k[order], t[order], d[order], n_keys)
    return np.asarray(peak, dtype=np.int64), np.asarray(held, dtype=np.int64)


@njit(cache=True)
def _peaks(k, t, d, n_keys):  # type: ignore[no-untyped-def]
    peak = np.zeros(n_keys, dtype=np.int64)
    held = np.zeros(n_keys, dtype=np.int64)
    level = 0
    for i in range(len(k)):
        if i > 0 and k[i] != k[i - 1]:
            level = 0
        if i > 0 and k[i] == k[i - 1] and level == peak[k[i]] and level > 0:
            held[k[i]] += t[i] - t[i - 1]
        level += d[i]
        if level > peak[k[i]]:
            peak[k[i]] = level
            held[k[i]] = 0
    return peak, held


def find_limits(w: Workload, upto: int, total_cores: int) -> Candidate | None:
    """A running limit per user (jobs, cores): a flat ceiling several users reached.

    In a log a limit shows as the same largest number of running jobs (or cores) for several
    of the heaviest users, with their other jobs queued meanwhile; without a limit each user's
    peak is where their own demand happened to top out, and the peaks differ. A core ceiling
    near the machine's size is the machine, not a limit.
    """
    m = _logged(w, upto)
    if m.sum() == 0:
        return None
    user = w.user[m].astype(np.int64)
    start = w.logged_start[m]
    end = start + w.run_time[m]
    out: dict[str, Any] = {}
    words = []
    for name, amount in (("user_jobs", np.ones(len(user), dtype=np.int64)),
                         ("user_cores", w.procs[m].astype(np.int64))):
        peak, _ = running_peaks(user, start, end, amount)
        top = int(peak.max())
        near = peak[peak >= CEILING_SHARE * top]
        if name == "user_cores" and top >= MACHINE_SHARE * total_cores:
            continue
        if top > 1 and len(near) >= CEILING_USERS:
            limit = int(np.median(near))
            out[name] = limit
            words.append(f"{len(near)} users peaked at {int(near.min())}-{top} running "
                         f"{'jobs' if name == 'user_jobs' else 'cores'} (limit set to their "
                         f"median, {limit})")
    if not out:
        return None
    return Candidate(out, "; ".join(words) + " (a flat ceiling shared by several users)")


def find_pools(w: Workload, upto: int, total_cores: int) -> Candidate | None:
    """Partitions on nodes of their own, sized by each one's peak concurrent use.

    Kept only when there are several partitions and their peaks fit the machine side by side
    (peaks that add up to more than the machine show partitions sharing nodes).
    """
    m = _logged(w, upto)
    if len(w.partitions) < 2 or m.sum() == 0:
        return None
    part = w.partition[m].astype(np.int64)
    start = w.logged_start[m]
    peak, _ = running_peaks(part, start, start + w.run_time[m], w.procs[m].astype(np.int64))
    counts = np.bincount(part, minlength=len(peak))
    used = [(w.partitions[i], int(peak[i])) for i in range(len(peak))
            if counts[i] >= POOL_MIN_JOBS and peak[i] > 0]
    if len(used) < 2:
        return None
    if sum(c for _, c in used) > total_cores:
        return None
    pools = tuple(Pool(name, cores) for name, cores in used)
    text = ", ".join(f"{name} peaked at {cores:,} cores" for name, cores in used)
    return Candidate({"pools": pools}, f"{text}; together {sum(c for _, c in used):,} of the "
                     f"machine's {total_cores:,} cores, so they need not share nodes")


def find_node_size(w: Workload, total_cores: int, header_cores: int) -> Candidate | None:
    """Cores per node from the machine description, else from job sizes that are multiples
    of it (whole-node allocation shows as allocated counts that are multiples)."""
    if header_cores > 1:
        return Candidate({"cores_per_node": header_cores, "whole_node": True},
                         f"the machine description gives {header_cores} cores per node")
    procs = w.procs[w.procs > 0]
    for k in (64, 48, 32, 28, 24, 20, 16, 12, 8, 4, 2):
        if total_cores % k == 0 and len(procs) and (procs % k == 0).mean() >= 0.9:
            share = float((procs % k == 0).mean())
            return Candidate({"cores_per_node": k, "whole_node": True},
                             f"{share:.0%} of jobs hold a multiple of {k} cores")
    return None


def find_machine_size(w: Workload, upto: int, total_cores: int) -> Candidate | None:
    """A larger machine where the fitted part of the log ran more cores at once than
    ``total_cores`` for at least :data:`OVER_SHARE` of its time: the core count that the
    logged use exceeded for only that share of the time."""
    m = _logged(w, upto)
    if m.sum() == 0:
        return None
    start = w.logged_start[m].astype(np.int64)
    procs = w.procs[m].astype(np.int64)
    t = np.concatenate((start, start + w.run_time[m].astype(np.int64)))
    order = np.lexsort((np.concatenate((procs, -procs)), t))  # ends first at equal times
    t = t[order]
    level = np.cumsum(np.concatenate((procs, -procs))[order])[:-1]
    held = np.diff(t)  # how long each running level lasted
    if held.sum() == 0:
        return None
    over = float(held[level > total_cores].sum() / held.sum())
    if over < OVER_SHARE:
        return None
    by_level = np.argsort(level)[::-1]
    reached = np.cumsum(held[by_level]) / held.sum()
    cores = int(level[by_level][np.searchsorted(reached, OVER_SHARE)])
    return Candidate({"machine_cores": cores},
                     f"the log ran more than the machine's {total_cores:,} cores for "
                     f"{over:.1%} of the fitted part's time (peak {int(level.max()):,}); "
                     f"{cores:,} cores were exceeded for {OVER_SHARE:.0%} of it")


def find_outages(w: Workload, upto: int, total_cores: int,
                 min_length_s: int = 3600) -> list[tuple[int, int, int]]:
    """Intervals of at least ``min_length_s`` when idle cores sat beside a waiting job that
    would have fitted in them: (start, end, cores missing), cores being the fewest idle
    meanwhile."""
    m = _logged(w, upto)
    if m.sum() == 0:
        return []
    sub, start = w.submit[m].astype(np.int64), w.logged_start[m].astype(np.int64)
    procs = w.procs[m].astype(np.int64)
    end = start + w.run_time[m].astype(np.int64)
    n = len(sub)
    # events: 0 = submit (enters the queue), 1 = start (leaves it, takes cores), 2 = end
    t = np.concatenate((sub, start, end))
    kind = np.repeat(np.arange(3, dtype=np.int64), n)
    order = np.lexsort((-kind, t))  # ends, then starts, then submits at equal times
    found = _idle_beside_waiting(t[order], kind[order], np.tile(np.arange(n), 3)[order], sub,
                                 start, procs, total_cores, min_length_s)
    return [(int(a), int(b), int(c)) for a, b, c in zip(*found, strict=True)]


def dated_outages(w: Workload, upto: int, total_cores: int) -> tuple[Outage, ...]:
    """The outages of :func:`find_outages` in the jobs before ``upto``, dated (Unix seconds
    from the workload's origin), each sized by the idle cores that held for most of it
    (:func:`idle_level`), merged when less than :data:`OUTAGE_GAP_S` apart, at least
    :data:`MIN_OUTAGE_SHARE` of the machine, the :data:`MAX_OUTAGES` largest."""
    found = [(a + w.origin, b + w.origin, idle_level(w, total_cores, a, b))
             for a, b, _ in find_outages(w, upto, total_cores)]
    return merge_outages(found, min_cores=max(1, round(total_cores * MIN_OUTAGE_SHARE)),
                         gap_s=OUTAGE_GAP_S, most=MAX_OUTAGES)


def idle_level(w: Workload, total_cores: int, start: int, end: int) -> int:
    """The idle cores of the logged schedule that held for at least half of ``[start, end)``
    (their time-weighted median): an outage's size, which the fewest idle cores understate
    while the jobs running on its cores drain away at its start.

    Example:
        >>> z = np.zeros(2, dtype=np.int64)
        >>> w = Workload(job_id=np.array(["a", "b"], dtype=object), submit=z,
        ...     run_time=np.array([10, 100]), req_walltime=z + 100, procs=np.array([6, 2]),
        ...     nodes=z, gpus=z, mem_mib=z, user=z.astype(np.int32),
        ...     partition=z.astype(np.int32), logged_start=z)
        >>> idle_level(w, 10, 0, 100)   # 2 idle for 10 s, then 8 for 90 s
        8
    """
    m = np.asarray(w.logged_start) >= 0
    begin = np.asarray(w.logged_start, dtype=np.int64)[m]
    finish = begin + np.asarray(w.run_time, dtype=np.int64)[m]
    procs = np.asarray(w.procs, dtype=np.int64)[m]
    over = (begin < end) & (finish > start)
    t = np.concatenate(([start], np.maximum(begin[over], start), np.minimum(finish[over], end)))
    d = np.concatenate(([0], procs[over], -procs[over]))
    order = np.lexsort((d, t))  # ends before starts at equal times
    t, busy = t[order], np.cumsum(d[order])
    length = np.diff(np.append(t, end))
    idle = total_cores - busy
    by = np.argsort(idle, kind="stable")
    half = np.searchsorted(np.cumsum(length[by]), (end - start) / 2)
    return int(idle[by][min(int(half), len(by) - 1)])


@njit(cache=True)
def _idle_beside_waiting(t, kind, job, sub, start, procs, total,  # type: ignore[no-untyped-def]
                         min_len):
    """Sweep the time-sorted events (``t``, ``kind``, ``job``); see :func:`find_outages`."""
    n = len(sub)
    waiting = np.zeros(n, np.bool_)
    # waiting jobs' sizes as counts per size (sizes up to the machine)
    count = np.zeros(total + 3, np.int64)
    busy = 0
    smallest = total + 2  # the smallest waiting job (scanned up lazily as jobs leave)
    a_s, a_e, a_c = [], [], []
    open_t, low = -1, total
    for idx in range(len(t) + 1):
        now = t[idx] if idx < len(t) else t[-1] + 1
        # the state holding since the previous event, up to now
        if idx > 0 and now > t[idx - 1]:
            idle = total - busy
            while smallest <= total and count[smallest] == 0:
                smallest += 1
            if smallest <= idle:
                if open_t < 0:
                    open_t = t[idx - 1]
                    low = idle
                low = min(low, idle)
            elif open_t >= 0:
                if t[idx - 1] - open_t >= min_len:
                    a_s.append(open_t)
                    a_e.append(t[idx - 1])
                    a_c.append(low)
                open_t = -1
        if idx == len(t):
            break
        j, k = job[idx], kind[idx]
        size = min(procs[j], total + 1)
        if k == 0 and start[j] > sub[j]:
            waiting[j] = True
            count[size] += 1
            smallest = min(smallest, size)
        elif k == 1:
            if waiting[j]:
                waiting[j] = False
                count[size] -= 1
            busy += procs[j]
        elif k == 2:
            busy -= procs[j]
    return np.array(a_s, np.int64), np.array(a_e, np.int64), np.array(a_c, np.int64)
