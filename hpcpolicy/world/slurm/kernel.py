"""The Slurm world's event loop, compiled (numba). What it models: :mod:`.replay`.

One call runs a whole log. The state is flat arrays: free cores per node, each running job's
cores per node (a pool indexed by job), a heap of (end, job), the queue sorted by
(PriorityTier, priority, submit order), and the running counts the limits read, per
(QOS, user), per QOS and per association.
"""

# The kernels are typed by numba when compiled; mypy sees untyped functions.
# mypy: disable-error-code="no-untyped-def, no-untyped-call, assignment"

from __future__ import annotations

import numpy as np
from numba import njit

from hpcpolicy.sim.nbstruct import BIG, heap_pop, heap_push
from hpcpolicy.world.slurm.placement import place
from hpcpolicy.world.slurm.priority import (
    classic_fairshare,
    decay_usage,
    fair_tree,
    job_priority,
    level_shares,
)

__all__ = ["STATS", "run_world"]

STATS = ("main_passes", "backfill_passes", "backfilled", "rejected_at_submit",
         "never_started", "priority_updates")
"""Counters the loop returns, in this order."""
TIER_SCALE = 2.0 ** 33
"""Sort key = tier * TIER_SCALE + priority (priorities are below 2^32)."""


@njit(cache=True)
def _key(tier, prio):
    return tier * TIER_SCALE + prio


@njit(cache=True)
def _before(ka, ja, kb, jb):
    """Job a sorts before job b: higher key, then earlier job."""
    return ka > kb or (ka == kb and ja < jb)


@njit(cache=True)
def _can_run(j, cores, qos, user, assoc, lim_q, lim_a, assoc_parent, rj_qu, rc_qu, rc_q,
             rj_a, rc_a):
    """Whether starting job ``j`` keeps every running limit (QOS MaxJobsPerUser,
    MaxTRESPerUser=cpu, GrpTRES=cpu; association MaxJobs, GrpTRES=cpu up the tree)."""
    c = cores[j]
    q, u, a = qos[j], user[j], assoc[j]
    if lim_q[0, q] > 0 and rj_qu[q, u] >= lim_q[0, q]:
        return False
    if lim_q[2, q] > 0 and rc_q[q] + c > lim_q[2, q]:
        return False
    if lim_q[3, q] > 0 and rc_qu[q, u] + c > lim_q[3, q]:
        return False
    if lim_a[0, a] > 0 and rj_a[a] >= lim_a[0, a]:
        return False
    x = a
    while x >= 0:
        if lim_a[2, x] > 0 and rc_a[x] + c > lim_a[2, x]:
            return False
        x = assoc_parent[x]
    return True


@njit(cache=True)
def _count(j, sign, cores, qos, user, assoc, assoc_parent, rj_qu, rc_qu, rc_q, rj_a, rc_a):
    """Add (sign 1) or remove (sign -1) running job ``j`` from the limits' counts."""
    c = cores[j] * sign
    q, u, a = qos[j], user[j], assoc[j]
    rj_qu[q, u] += sign
    rc_qu[q, u] += c
    rc_q[q] += c
    rj_a[a] += sign
    x = a
    while x >= 0:
        rc_a[x] += c
        x = assoc_parent[x]


@njit(cache=True)
def _insert(queue, qn, keys, j):
    """Insert job ``j`` into ``queue[:qn]`` (sorted); the new length."""
    lo, hi = 0, qn
    while lo < hi:
        mid = (lo + hi) >> 1
        if _before(keys[queue[mid]], queue[mid], keys[j], j):
            lo = mid + 1
        else:
            hi = mid
    for i in range(qn, lo, -1):
        queue[i] = queue[i - 1]
    queue[lo] = j
    return qn + 1


@njit(cache=True)
def _remove_at(queue, qn, i):
    for k in range(i, qn - 1):
        queue[k] = queue[k + 1]
    return qn - 1


@njit(cache=True)
def _align(t, origin, res):
    """``t`` rounded down to a bf_resolution boundary of absolute time."""
    return (t + origin) // res * res - origin


@njit(cache=True)
def run_world(submit, cores, want_nodes, limit, run, rejected, part, qos, user, assoc,
              static_prio, part_tier, node_cores, part_ptr, part_nodes, lim_q, lim_a,
              assoc_parent, assoc_shares, assoc_is_user, n_users, pool_ptr,
              iparams, fparams, start, backfilled, refused, stats):
    """Replay every job; fills ``start`` (-1: never started), ``backfilled``, ``refused``
    (refused at submit by MaxSubmit limits) and ``stats`` (:data:`STATS`).

    ``lim_q`` rows: MaxJobsPerUser, MaxSubmitJobsPerUser, GrpTRES=cpu, MaxTRESPerUser=cpu
    per QOS; ``lim_a`` rows: MaxJobs, MaxSubmit, GrpTRES=cpu per association. ``iparams``:
    multifactor, max_age, calc_period, fair_tree, backfill, bf_interval, bf_window,
    bf_resolution, bf_max_job_test, bf_max_job_user, default_queue_depth, origin;
    ``fparams``: weight_age, weight_fairshare, decay_factor (per second).
    """
    n = submit.shape[0]
    n_nodes = node_cores.shape[0]
    n_q = lim_q.shape[1]
    n_a = assoc_parent.shape[0]
    multifactor, max_age, calc_period = iparams[0], iparams[1], iparams[2]
    use_fair_tree, use_backfill, bf_interval = iparams[3], iparams[4], iparams[5]
    bf_window, bf_res, bf_max_test = iparams[6], iparams[7], iparams[8]
    bf_max_user, depth, origin = iparams[9], iparams[10], iparams[11]
    w_age, w_fs, decay = fparams[0], fparams[1], fparams[2]
    dynamic = multifactor != 0 and (w_age != 0.0 or w_fs != 0.0)

    free = node_cores.copy()
    pool_node = np.zeros(pool_ptr[n], dtype=np.int64)
    pool_cores = np.zeros(pool_ptr[n], dtype=np.int64)
    pool_cnt = np.zeros(n, dtype=np.int64)
    planned_end = np.zeros(n, dtype=np.int64)
    heap = np.zeros((2, n + 1), dtype=np.int64)
    hn = 0
    queue = np.zeros(n + 1, dtype=np.int64)
    qn = 0
    keys = np.zeros(n, dtype=np.float64)
    running = np.zeros(n + 1, dtype=np.int64)
    run_pos = np.full(n, -1, dtype=np.int64)
    rn = 0
    rj_qu = np.zeros((n_q, n_users), dtype=np.int64)
    rc_qu = np.zeros((n_q, n_users), dtype=np.int64)
    sub_qu = np.zeros((n_q, n_users), dtype=np.int64)
    rc_q = np.zeros(n_q, dtype=np.int64)
    rj_a = np.zeros(n_a, dtype=np.int64)
    rc_a = np.zeros(n_a, dtype=np.int64)
    sub_a = np.zeros(n_a, dtype=np.int64)
    usage = np.zeros(n_a, dtype=np.float64)
    new_usage = np.zeros(n_a, dtype=np.float64)
    fs = np.zeros(n_a, dtype=np.float64)
    level = level_shares(assoc_shares, assoc_parent)
    if w_fs != 0.0:
        if use_fair_tree:
            fair_tree(usage, assoc_shares, level, assoc_parent, assoc_is_user, fs)
        else:
            classic_fairshare(usage, assoc_shares, level, assoc_parent, fs)
    mark = np.zeros(n_nodes, dtype=np.int64)
    stamp = 0
    max_take = 1
    for p in range(part_ptr.shape[0] - 1):
        max_take = max(max_take, part_ptr[p + 1] - part_ptr[p])
    take_node = np.zeros(max_take + 1, dtype=np.int64)
    take_cores = np.zeros(max_take + 1, dtype=np.int64)
    scratch = np.zeros((3, max_take + 1), dtype=np.int64)
    pmark = np.zeros(n_nodes, dtype=np.int64)
    # backfill scratch
    cap = n + 1
    rel_t = np.zeros(cap, dtype=np.int64)
    rel_j = np.zeros(cap, dtype=np.int64)
    held_t0 = np.zeros(cap, dtype=np.int64)
    held_t1 = np.zeros(cap, dtype=np.int64)
    held_end = np.zeros(cap, dtype=np.int64)
    held_ptr = np.zeros(cap + 1, dtype=np.int64)
    held_nodes = np.zeros(pool_ptr[n] + 1, dtype=np.int64)
    fa = np.zeros(n_nodes, dtype=np.int64)
    tested_user = np.zeros(n_users, dtype=np.int64)
    user_stamp = np.full(n_users, -1, dtype=np.int64)
    suffix = np.zeros(n + 1, dtype=np.int64)

    nxt = 0
    now = -1
    last_bf = -1
    last_calc = 0
    next_calc = calc_period
    dirty = False
    while nxt < n or hn > 0 or qn > 0:
        t_ev = submit[nxt] if nxt < n else BIG
        if hn > 0 and heap[0, 0] < t_ev:
            t_ev = heap[0, 0]
        t_bf = BIG
        if use_backfill and dirty and qn > 0:
            t_bf = (now // bf_interval + 1) * bf_interval
        t_calc = BIG
        if dynamic and qn > 0:
            if next_calc <= now:
                next_calc = (now // calc_period + 1) * calc_period
            t_calc = next_calc
        if nxt == n and hn == 0 and t_bf == BIG:
            break  # nothing will end or arrive: the jobs left wait on limits for ever
        now = min(t_ev, t_bf, t_calc)
        if now == t_calc:  # ---------------------------------- priorities recalculated
            if w_fs != 0.0:
                for i in range(rn):
                    j = running[i]
                    dt = now - max(start[j], last_calc)
                    new_usage[assoc[j]] += cores[j] * dt * decay ** dt
                decay_usage(usage, new_usage, assoc_parent, decay ** (now - last_calc))
                if use_fair_tree:
                    fair_tree(usage, assoc_shares, level, assoc_parent, assoc_is_user, fs)
                else:
                    classic_fairshare(usage, assoc_shares, level, assoc_parent, fs)
            last_calc = now
            next_calc = now + calc_period
            for i in range(qn):
                j = queue[i]
                keys[j] = _key(part_tier[part[j]], job_priority(
                    static_prio[j], w_age, now - submit[j], max_age, w_fs, fs[assoc[j]]))
            order = np.argsort(-keys[queue[:qn]], kind="mergesort")
            queue[:qn] = queue[:qn][order]
            stats[5] += 1
            dirty = True
        if now == t_ev:  # -------------------------------------- ends, then submissions
            while hn > 0 and heap[0, 0] == now:
                j = heap[1, 0]
                hn = heap_pop(heap, hn)
                for k in range(pool_cnt[j]):
                    free[pool_node[pool_ptr[j] + k]] += pool_cores[pool_ptr[j] + k]
                _count(j, -1, cores, qos, user, assoc, assoc_parent, rj_qu, rc_qu, rc_q,
                       rj_a, rc_a)
                sub_qu[qos[j], user[j]] -= 1
                sub_a[assoc[j]] -= 1
                last = running[rn - 1]
                running[run_pos[j]] = last
                run_pos[last] = run_pos[j]
                rn -= 1
                if w_fs != 0.0 and dynamic:
                    dt = now - max(start[j], last_calc)
                    new_usage[assoc[j]] += cores[j] * dt * decay ** dt
            while nxt < n and submit[nxt] == now:
                j = nxt
                nxt += 1
                if rejected[j]:
                    continue
                q, a = qos[j], assoc[j]
                if (lim_q[1, q] > 0 and sub_qu[q, user[j]] >= lim_q[1, q]) or (
                        lim_a[1, a] > 0 and sub_a[a] >= lim_a[1, a]):
                    refused[j] = True
                    stats[3] += 1
                    continue
                sub_qu[q, user[j]] += 1
                sub_a[a] += 1
                prio = 0.0
                if multifactor:
                    prio = job_priority(static_prio[j], w_age, 0, max_age, w_fs, fs[a])
                keys[j] = _key(part_tier[part[j]], prio)
                qn = _insert(queue, qn, keys, j)
            # ------------------------------------------------------------ the main pass
            stats[0] += 1
            stamp += 1
            i = 0
            tested = 0
            total_free = 0  # free cores on the nodes still open to this pass
            for x in range(n_nodes):
                total_free += max(free[x], 0)
            while i < qn and tested < depth and total_free > 0:
                j = queue[i]
                tested += 1
                if not _can_run(j, cores, qos, user, assoc, lim_q, lim_a, assoc_parent,
                                rj_qu, rc_qu, rc_q, rj_a, rc_a):
                    i += 1
                    continue
                p = part[j]
                lo, cnt = part_ptr[p], part_ptr[p + 1] - part_ptr[p]
                got = -1
                if cores[j] <= total_free:
                    got = place(free, part_nodes[lo:], cnt, mark, stamp, cores[j],
                                want_nodes[j], take_node, take_cores, scratch)
                if got < 0:
                    for k in range(cnt):
                        x = part_nodes[lo + k]
                        if mark[x] != stamp:  # closed now: its cores leave the pass
                            mark[x] = stamp
                            total_free -= max(free[x], 0)
                    i += 1
                    continue
                qn = _remove_at(queue, qn, i)
                total_free -= cores[j]
                _begin(j, now, got, take_node, take_cores, free, pool_ptr, pool_node,
                       pool_cores, pool_cnt, limit, run, start, planned_end, heap, hn)
                hn += 1
                running[rn] = j
                run_pos[j] = rn
                rn += 1
                _count(j, 1, cores, qos, user, assoc, assoc_parent, rj_qu, rc_qu, rc_q,
                       rj_a, rc_a)
            dirty = True
        if use_backfill and dirty and qn > 0 and now % bf_interval == 0 and now > last_bf:
            stats[1] += 1  # ------------------------------------------------- backfill
            last_bf = now
            dirty = False
            # running jobs by planned end (start + limit: Slurm plans with the limit)
            for i in range(rn):
                rel_j[i] = running[i]
                rel_t[i] = planned_end[running[i]]
            order = np.argsort(rel_t[:rn], kind="mergesort")
            rel_t[:rn] = rel_t[:rn][order]
            rel_j[:rn] = rel_j[:rn][order]
            n_rel = rn
            n_held = 0
            held_ptr[0] = 0
            blocked = False
            suffix[qn] = BIG
            for i in range(qn - 1, -1, -1):
                suffix[i] = min(suffix[i + 1], cores[queue[i]])
            total_free = 0
            for x in range(n_nodes):
                total_free += max(free[x], 0)
            tested = 0
            i = 0
            while i < qn and tested < bf_max_test:
                if total_free < suffix[i]:
                    break  # no job left could start now: later reservations change nothing
                j = queue[i]
                if bf_max_user > 0:
                    if user_stamp[user[j]] != stats[1]:
                        user_stamp[user[j]] = stats[1]
                        tested_user[user[j]] = 0
                    if tested_user[user[j]] >= bf_max_user:
                        i += 1
                        continue
                    tested_user[user[j]] += 1
                tested += 1
                if not _can_run(j, cores, qos, user, assoc, lim_q, lim_a, assoc_parent,
                                rj_qu, rc_qu, rc_q, rj_a, rc_a):
                    i += 1
                    continue
                p = part[j]
                lo, cnt = part_ptr[p], part_ptr[p + 1] - part_ptr[p]
                lim = limit[j]
                fa[:] = free
                pfa = 0  # free cores of the job's partition in the plan at t
                for k in range(cnt):
                    pmark[part_nodes[lo + k]] = stats[1] * (n + 1) + j + 1
                    pfa += max(fa[part_nodes[lo + k]], 0)
                here = stats[1] * (n + 1) + j + 1
                r = 0
                hp = 0
                t = now
                got = -1
                while t <= now + bf_window:
                    while r < n_rel and rel_t[r] <= t:
                        for k in range(pool_cnt[rel_j[r]]):
                            x = pool_node[pool_ptr[rel_j[r]] + k]
                            fa[x] += pool_cores[pool_ptr[rel_j[r]] + k]
                            if pmark[x] == here:
                                pfa += pool_cores[pool_ptr[rel_j[r]] + k]
                        r += 1
                    if pfa >= cores[j]:  # else it cannot fit: no need to place
                        stamp += 1
                        for x in range(n_held):
                            if held_t0[x] <= t + lim and held_t1[x] > t:
                                for k in range(held_ptr[x], held_ptr[x + 1]):
                                    mark[held_nodes[k]] = stamp
                        got = place(fa, part_nodes[lo:], cnt, mark, stamp, cores[j],
                                    want_nodes[j], take_node, take_cores, scratch)
                        if got >= 0:
                            break
                    # the next candidate: a planned end or a reservation's end after t
                    nt = BIG
                    if r < n_rel:
                        nt = rel_t[r]
                    while hp < n_held and held_end[hp] <= t:
                        hp += 1
                    if hp < n_held and held_end[hp] < nt:
                        nt = held_end[hp]
                    t = nt
                if got < 0:
                    i += 1
                    continue
                if t == now:
                    qn = _remove_at(queue, qn, i)
                    total_free -= cores[j]
                    # later suffix minima still hold: removing a job only raises them
                    _begin(j, now, got, take_node, take_cores, free, pool_ptr, pool_node,
                           pool_cores, pool_cnt, limit, run, start, planned_end, heap, hn)
                    hn += 1
                    running[rn] = j
                    run_pos[j] = rn
                    rn += 1
                    _count(j, 1, cores, qos, user, assoc, assoc_parent, rj_qu, rc_qu, rc_q,
                           rj_a, rc_a)
                    backfilled[j] = blocked
                    if blocked:
                        stats[2] += 1
                    # its cores come back at its planned end: a new breakpoint of the plan
                    pos = n_rel
                    while pos > 0 and rel_t[pos - 1] > now + lim:
                        rel_t[pos] = rel_t[pos - 1]
                        rel_j[pos] = rel_j[pos - 1]
                        pos -= 1
                    rel_t[pos] = now + lim
                    rel_j[pos] = j
                    n_rel += 1
                    continue
                blocked = True
                t0 = _align(t, origin, bf_res)
                held_t0[n_held] = t0
                held_t1[n_held] = max(_align(t + lim, origin, bf_res), t0 + bf_res)
                for k in range(got):
                    held_nodes[held_ptr[n_held] + k] = take_node[k]
                held_ptr[n_held + 1] = held_ptr[n_held] + got
                pos = n_held  # the reservations' ends, kept sorted
                while pos > 0 and held_end[pos - 1] > held_t1[n_held]:
                    held_end[pos] = held_end[pos - 1]
                    pos -= 1
                held_end[pos] = held_t1[n_held]
                n_held += 1
                i += 1
    for j in range(n):
        if start[j] < 0 and not rejected[j] and not refused[j]:
            stats[4] += 1


@njit(cache=True)
def _begin(j, now, got, take_node, take_cores, free, pool_ptr, pool_node, pool_cores,
           pool_cnt, limit, run, start, planned_end, heap, hn):
    """Start job ``j`` now on the ``got`` nodes taken; push its end (the caller counts the
    heap's new size)."""
    for k in range(got):
        free[take_node[k]] -= take_cores[k]
        pool_node[pool_ptr[j] + k] = take_node[k]
        pool_cores[pool_ptr[j] + k] = take_cores[k]
    pool_cnt[j] = got
    start[j] = now
    planned_end[j] = now + limit[j]
    heap_push(heap, hn, now + run[j], j)
