"""The compiled engine (numba): the project's semantics on flat arrays.

Same rules as :mod:`hpcpolicy.sim.reference`, written for speed (data structures in
:mod:`hpcpolicy.sim.nbstruct`):

* running jobs sit in a heap keyed by (actual end, job) for finish events, and — when
  backfilling is on — in a list sorted by (requested end, job) that planning walks;
* waiting jobs of a static policy (a fixed score per job) live in a rank tree: the best one
  is the first leaf, and backfilling jumps from candidate to candidate; dynamic policies
  (WFP3, UNICEP, fair share) and Python policies keep a queue in submit order, scored and
  stably sorted at each pass;
* EASY's shadow time is kept while the head and the running jobs stay the same;
* conservative backfilling rebuilds its availability profile (breakpoints x groups x
  resources) at each pass and stops placing reservations as soon as no remaining job could
  start now — later reservations could not change this pass's decisions.

The data live in two namedtuples of arrays, :data:`Jobs` (read-only) and :data:`State`
(mutable; scalars in ``State.sc``), so that a run can stop at a decision and resume:
:func:`run_to_end` runs a built-in policy to the end in one call, while :func:`next_decision`
and :func:`decide` hand each decision to Python (a learned policy, the RL environment). Only
these entry points take the namedtuples; they borrow every array once (:func:`borrow`) and the
helpers take plain arrays. Violations of the ``check`` invariants are recorded in ``State.sc``
(VIOL*) and raised by the caller, which can build the message.
"""

# The kernels are typed by numba when compiled; mypy sees untyped functions.
# mypy: disable-error-code="no-untyped-def, no-untyped-call, call-arg"

from __future__ import annotations

import math
from collections import namedtuple

import numpy as np
from numba import njit

from hpcpolicy.sim.nbstruct import (
    BIG,
    borrow,
    heap_pop,
    heap_push,
    list_insert,
    list_remove,
    tree_find,
    tree_set,
)

# The entry points, and the kernels the RLScheduler-compatible engine (hpcpolicy.sim.compat),
# the environment and the logged-decision sweep share with this engine.
__all__ = ["Jobs", "State", "decide", "dynamic_score", "fairshare_add", "fit_group",
           "next_decision", "occupy", "run_to_end", "unpack"]

LN2 = math.log(2.0)
SCALE_DOWN = 2.0 ** -256

# Kernel kinds (hpcpolicy.policies.base.KERNEL_KINDS order) and the stepping mode.
STATIC, WFP3, UNICEP, FAIRSHARE, EXTERNAL = 0, 1, 2, 3, 4
NONE, EASY, CONSERVATIVE = 0, 1, 2

# Rows of Jobs.ji: per workload job, except BY_RANK (per rank: the job at that rank).
SUBMIT, DUR, LENGTH, USER, RANK, NEVER, MINCORES, BY_RANK = range(8)
# Jobs.ip: integer parameters.
IP_KIND, IP_BACKFILL, IP_CHECK, IP_N, IP_M, IP_HALF_LIFE, IP_MAX_AGE, IP_USER_JOBS, \
    IP_USER_CORES = range(9)
"""``IP_USER_JOBS`` / ``IP_USER_CORES``: running limits per user (a site model's), 0 for none."""
# Jobs.fp: float parameters.
FP_W_FS, FP_W_AGE, FP_N_USERS = range(3)

# Rows of State.js (per job, running-at-start jobs included).
START, FIN, PEND, GRP, BF = range(5)
# State.sc: scalars.
(NOW, QH, QT, NWAIT, HLEN, PLO, NEXT, EVENTS, FINISHES, PASSES, STARTED, BACKFILLED,
 DECISIONS, OVERRUNS, RES_HEAD, RES_T, RES_OVR, VIOL, VIOL_J, VIOL_T, PHASE, T0, MIDSTART,
 RLEN, SH_HEAD, SH_T, SH_G, SH_FIN, FIRST, WLEN, PHI, CNEXT) = range(32)
N_SCALARS = 32
# State.sc[VIOL] codes.
VIOL_RESERVATION_LATER, VIOL_HEAD_LATE = 1, 2
# State.sc[PHASE]: waiting for the next event, or inside a scheduling pass.
WAITING, IN_PASS = 0, 1

Jobs = namedtuple("Jobs", ["ji", "need", "a", "minc", "ip", "fp", "cap"])
"""Read-only: ji (8, n) rows SUBMIT..BY_RANK; need (N, G, 4); a (n,) kernel coefficient;
minc (G,) smallest core demand per group; ip / fp parameters; cap (6, K) the capacity changes
over time (:func:`hpcpolicy.sim.capacity.changes`), the next one at ``sc[CNEXT]``."""

State = namedtuple("State", ["sc", "js", "heap", "plan", "tree", "wheap", "queue", "order",
                             "scores", "free", "tmp", "prof_t", "prof_f", "smin", "fs", "urun"])
"""Mutable: sc scalars; js (5, N) rows START..BF; heap (2, N) the finish events, a heap of
(time, job) rows; plan (2, 2N + 1) the running jobs' requested ends, a sorted list of
(time, job) in plan[:, PLO:PHI] (the RLScheduler engine keeps its running list in plan[1]);
tree (2, 2P) the rank tree (static policies with backfilling); wheap (2, n) a heap of
(rank, job) (static policies without: only the best job matters); queue, order (n,) and scores
(n,) for the other policies; free (G, 4); tmp (G + 1, 4), its last row EASY's extra
resources; prof_t (P,)
and prof_f (P, G, 4) the conservative profile; smin (n + 1, G); fs (users + 1,) decayed usage
per user, then the total; urun (2, users) each user's running jobs and cores (under running
limits; one column otherwise)."""


@njit(cache=True)
def unpack(J, S):
    """Borrowed views of every array of a run."""
    ji, need, a, minc, ip, fp, cap = J
    (sc, js, heap, plan, tree, wheap, queue, order, scores, free, tmp, prof_t, prof_f, smin, fs,
     urun) = S
    return ((borrow(ji), borrow(need), borrow(a), borrow(minc), borrow(ip), borrow(fp),
             borrow(cap)),
            (borrow(sc), borrow(js), borrow(heap), borrow(plan), borrow(tree), borrow(wheap),
             borrow(queue), borrow(order), borrow(scores), borrow(free), borrow(tmp),
             borrow(prof_t), borrow(prof_f), borrow(smin), borrow(fs), borrow(urun)))


# ---------------------------------------------------------------- resources and groups
@njit(cache=True, inline="always")
def _fits(need, free, j, g):
    if need[j, g, 0] < 0:
        return False
    for r in range(4):  # noqa: SIM110 (plain loops compile best)
        if need[j, g, r] > free[g, r]:
            return False
    return True


@njit(cache=True, inline="always")
def fit_group(need, free, j):
    """The first group whose free resources hold job j's demand there, or -1."""
    for g in range(free.shape[0]):
        if _fits(need, free, j, g):
            return g
    return -1


@njit(cache=True, inline="always")
def _within(need, tmp, j, g, row):
    """Whether job j's demand in group g fits in tmp[row]."""
    for r in range(4):  # noqa: SIM110 (plain loops compile best)
        if need[j, g, r] > tmp[row, r]:
            return False
    return True


@njit(cache=True, inline="always")
def _max_free_cores(free):
    best = free[0, 0]
    for g in range(1, free.shape[0]):
        best = max(best, free[g, 0])
    return best


# ---------------------------------------------------------------- running limits
@njit(cache=True, inline="always")
def _limited(ip):
    return ip[IP_USER_JOBS] > 0 or ip[IP_USER_CORES] > 0


@njit(cache=True, inline="always")
def _allowed(ji, ip, urun, j):
    """Whether job j's user may start it under the running limits (always without limits).
    A user with nothing running may start any job, so that one larger than the core limit
    is not held forever."""
    u = ji[USER, j]
    if ip[IP_USER_JOBS] > 0 and urun[0, u] >= ip[IP_USER_JOBS]:
        return False
    return not (ip[IP_USER_CORES] > 0 and urun[1, u] > 0
                and urun[1, u] + ji[MINCORES, j] > ip[IP_USER_CORES])


@njit(cache=True, inline="always")
def _by_heap(ip):
    """Whether the waiting jobs sit in a heap (only the best one matters): a static policy
    without backfilling or running limits, which would make the engine look past the best."""
    return ip[IP_KIND] == STATIC and ip[IP_BACKFILL] == NONE and not _limited(ip)


# ---------------------------------------------------------------- the waiting jobs
@njit(cache=True, inline="always")
def _enqueue(ji, ip, sc, tree, wheap, queue, j):
    if _by_heap(ip):
        sc[WLEN] = heap_push(wheap, sc[WLEN], ji[RANK, j], j)
    elif ip[IP_KIND] == STATIC:
        tree_set(tree, ji[RANK, j], ji[MINCORES, j], ji[LENGTH, j])
        sc[FIRST] = min(sc[FIRST], ji[RANK, j])
    else:
        queue[sc[QT]] = j
        sc[QT] += 1
    sc[NWAIT] += 1


@njit(cache=True, inline="always")
def _compact(sc, js, queue):
    """Drop started jobs from the submit-order queue."""
    qh, qt = sc[QH], sc[QT]
    while qh < qt and js[START, queue[qh]] >= 0:
        qh += 1
    if sc[MIDSTART]:
        w = qh
        for i in range(qh, qt):
            j = queue[i]
            if js[START, j] < 0:
                queue[w] = j
                w += 1
        qt = w
        sc[MIDSTART] = 0
    sc[QH] = qh
    sc[QT] = qt


# ---------------------------------------------------------------- fair share usage
@njit(cache=True, inline="always")
def fairshare_add(ji, need, ip, sc, js, fs, j):
    """Add finished job j's core-seconds, weighted for the half-life decay, to its user's usage
    and to the total (the last entry of fs)."""
    hl_i = ip[IP_HALF_LIFE]
    hl = float(hl_i)
    fin = js[FIN, j]
    total = fs.shape[0] - 1
    while fin - sc[T0] > 512 * hl_i:
        for u in range(total + 1):
            fs[u] *= SCALE_DOWN
        sc[T0] += 256 * hl_i
    x1 = float(js[START, j] - sc[T0]) / hl
    x2 = float(fin - sc[T0]) / hl
    cores = float(need[j, js[GRP, j], 0])
    c = cores * (hl / LN2) * (math.exp(LN2 * x2) - math.exp(LN2 * x1))
    fs[ji[USER, j]] += c
    fs[total] += c


# ---------------------------------------------------------------- starting a job
@njit(cache=True, inline="always")
def occupy(ji, need, js, free, j, g, now):
    """Job ``j`` starts at ``now`` in group ``g``: its start, end, planned end and group are
    recorded and its resources taken (the bookkeeping every engine's start shares)."""
    js[START, j] = now
    js[FIN, j] = now + ji[DUR, j]
    js[PEND, j] = now + ji[LENGTH, j]
    js[GRP, j] = g
    for r in range(4):
        free[g, r] -= need[j, g, r]


@njit(cache=True, inline="always")
def _trusted(sc, plan):
    """No running job is past its requested end and none ended late since the reservation."""
    if sc[OVERRUNS] != sc[RES_OVR]:
        return False
    return sc[PHI] == sc[PLO] or plan[0, sc[PLO]] > sc[NOW]


@njit(cache=True, inline="always")
def _start(ji, need, ip, sc, js, heap, plan, tree, wheap, free, urun, j, g, backfilled):
    now = sc[NOW]
    if ip[IP_CHECK] and not backfilled:
        # The head starts (on time?), or a better-scored job overtakes it: either way the
        # promise made to the head is settled.
        if j == sc[RES_HEAD] and _trusted(sc, plan) and now > sc[RES_T] and sc[VIOL] == 0:
            sc[VIOL] = VIOL_HEAD_LATE
            sc[VIOL_J] = j
            sc[VIOL_T] = now
        sc[RES_HEAD] = -1
    if not backfilled:
        sc[SH_HEAD] = -1  # a job that is not backfilled may outlive EASY's shadow time
    occupy(ji, need, js, free, j, g, now)
    sc[HLEN] = heap_push(heap, sc[HLEN], js[FIN, j], j)
    if ip[IP_BACKFILL] != NONE:
        sc[PLO], sc[PHI] = list_insert(plan, sc[PLO], sc[PHI], js[PEND, j], j)
    sc[STARTED] += 1
    sc[NWAIT] -= 1
    if ip[IP_KIND] != STATIC:
        sc[MIDSTART] = 1
    elif _by_heap(ip):
        sc[WLEN] = heap_pop(wheap, sc[WLEN])  # j is the best waiting job: the top
    else:
        tree_set(tree, ji[RANK, j], BIG, BIG)
    if backfilled:
        js[BF, j] = 1
        sc[BACKFILLED] += 1
    if _limited(ip):
        urun[0, ji[USER, j]] += 1
        urun[1, ji[USER, j]] += need[j, g, 0]


# ---------------------------------------------------------------- events
@njit(cache=True, inline="always")
def _advance(ji, need, ip, cap, sc, js, heap, plan, tree, wheap, queue, free, fs, urun):
    """Jump to the next event time; apply its finishes, its capacity changes, then its
    submits. False when none."""
    n = ip[IP_N]
    nxt = sc[NEXT]
    while nxt < n and ji[NEVER, nxt]:
        nxt += 1
    t = ji[SUBMIT, nxt] if nxt < n else BIG
    if sc[HLEN] > 0 and heap[0, 0] < t:
        t = heap[0, 0]
    c = sc[CNEXT]
    if c < cap.shape[1] and cap[0, c] < t:
        t = cap[0, c]
    if t == BIG:
        sc[NEXT] = nxt
        return False
    sc[NOW] = t
    while sc[HLEN] > 0 and heap[0, 0] == t:
        j = heap[1, 0]
        sc[HLEN] = heap_pop(heap, sc[HLEN])
        g = js[GRP, j]
        for r in range(4):
            free[g, r] += need[j, g, r]
        if ip[IP_BACKFILL] != NONE:
            sc[PLO], sc[PHI] = list_remove(plan, sc[PLO], sc[PHI], js[PEND, j], j)
        if js[FIN, j] > js[PEND, j]:
            sc[OVERRUNS] += 1
        if j < n and ip[IP_KIND] >= FAIRSHARE:  # only these read the usage
            fairshare_add(ji, need, ip, sc, js, fs, j)
        if j < n and _limited(ip):
            urun[0, ji[USER, j]] -= 1
            urun[1, ji[USER, j]] -= need[j, g, 0]
        sc[EVENTS] += 1
        sc[FINISHES] += 1
    while c < cap.shape[1] and cap[0, c] == t:
        # Free may go below zero: running jobs are left to finish (hpcpolicy.sim.capacity).
        for r in range(4):
            free[cap[1, c], r] += cap[2 + r, c]
        sc[OVERRUNS] += 1  # EASY's promise to the head is void across a change
        sc[SH_HEAD] = -1  # and its shadow time must be computed again
        c += 1
    sc[CNEXT] = c
    while nxt < n and ji[SUBMIT, nxt] == t:
        if not ji[NEVER, nxt]:
            _enqueue(ji, ip, sc, tree, wheap, queue, nxt)
            sc[EVENTS] += 1
        nxt += 1
    sc[NEXT] = nxt
    return True


# ---------------------------------------------------------------- scoring
@njit(cache=True, inline="always")
def dynamic_score(ji, a, ip, fp, fs, j, now):
    """Job j's score at time now under a dynamic policy (WFP3, UNICEP, fair share); lower
    runs first."""
    kind = ip[IP_KIND]
    w = float(now - ji[SUBMIT, j])
    if kind == WFP3:
        return -(w * w * w) * a[j]
    if kind == UNICEP:
        return -(w / a[j])
    total = fs[fs.shape[0] - 1]
    share = fs[ji[USER, j]] / total if total > 0.0 else 0.0
    factor = math.exp(-LN2 * fp[FP_N_USERS] * share)
    age = min(w / float(ip[IP_MAX_AGE]), 1.0)
    return -(a[j] + fp[FP_W_AGE] * age + fp[FP_W_FS] * factor)


@njit(cache=True)
def _sorted_by_scores(sc, queue, order, scores, q):
    """order[:q] = the queue sorted by scores[:q] (stable: ties keep submit order)."""
    idx = np.argsort(scores[:q], kind="mergesort")
    qh = sc[QH]
    for i in range(q):
        order[i] = queue[qh + idx[i]]
    return order[:q]


# ---------------------------------------------------------------- EASY
@njit(cache=True)
def _shadow(ji, need, ip, sc, js, plan, free, tmp, head):
    """Earliest planned (time, group) for the head; its extra resources are in tmp[G].

    Kept (with the extra resources, which backfilled jobs consume) while the head is the same
    and no job has finished or run past its requested end since it was computed."""
    now = sc[NOW]
    G = free.shape[0]
    if (sc[SH_HEAD] == head and sc[SH_FIN] == sc[FINISHES]
            and (sc[PHI] == sc[PLO] or plan[0, sc[PLO]] > now)):
        return sc[SH_T], sc[SH_G]
    for g in range(G):
        for r in range(4):
            tmp[g, r] = free[g, r]
    i, size = sc[PLO], sc[PHI]
    t, gh = BIG, -1
    while i < size and gh < 0:
        t = max(plan[0, i], now + 1)
        while i < size and max(plan[0, i], now + 1) == t:
            j = plan[1, i]
            g = js[GRP, j]
            for r in range(4):
                tmp[g, r] += need[j, g, r]
            i += 1
        for g in range(G):
            if _fits(need, tmp, head, g):
                for r in range(4):
                    tmp[G, r] = tmp[g, r] - need[head, g, r]
                gh = g
                break
    if gh < 0:
        t = BIG  # out of capacity even once every running job has ended: no reservation
    sc[SH_HEAD] = head
    sc[SH_T] = t
    sc[SH_G] = gh
    sc[SH_FIN] = sc[FINISHES]
    return t, gh


@njit(cache=True, inline="always")
def _easy_group(need, free, tmp, j, gh, in_time):
    """The group job j may start in now under EASY's rules, or -1; takes its extra share."""
    G = free.shape[0]
    for g in range(G):
        if not _fits(need, free, j, g):
            continue
        if g != gh or in_time:
            return g
        if _within(need, tmp, j, g, G):
            for r in range(4):
                tmp[G, r] -= need[j, g, r]
            return g
    return -1


@njit(cache=True)
def _easy_begin(ji, need, ip, sc, js, plan, free, tmp, head):
    """The head's reservation, after the invariant bookkeeping of ``check``."""
    shadow, gh = _shadow(ji, need, ip, sc, js, plan, free, tmp, head)
    if ip[IP_CHECK]:
        if (sc[RES_HEAD] == head and _trusted(sc, plan) and shadow > sc[RES_T]
                and sc[VIOL] == 0):
            sc[VIOL] = VIOL_RESERVATION_LATER
            sc[VIOL_J] = head
            sc[VIOL_T] = sc[NOW]
        sc[RES_HEAD] = head
        sc[RES_T] = shadow
        sc[RES_OVR] = sc[OVERRUNS]
    return shadow, gh


@njit(cache=True)
def _easy_ranked(ji, need, minc, ip, sc, js, heap, plan, tree, wheap, free, urun, tmp, head,
                 pos):
    """EASY over the rank tree: visit only the jobs that could start now."""
    now = sc[NOW]
    shadow, gh = _easy_begin(ji, need, ip, sc, js, plan, free, tmp, head)
    G = free.shape[0]
    span = shadow - now if G == 1 else BIG
    p = pos + 1
    while True:
        extra = tmp[G, 0] if G == 1 else BIG
        p = tree_find(tree, p, _max_free_cores(free), span, extra)
        if p < 0:
            break
        j = ji[BY_RANK, p]
        if _allowed(ji, ip, urun, j):
            g = _easy_group(need, free, tmp, j, gh, now + ji[LENGTH, j] <= shadow)
            if g >= 0:
                _start(ji, need, ip, sc, js, heap, plan, tree, wheap, free, urun, j, g, 1)
        p += 1


@njit(cache=True, inline="always")
def _nothing_fits(minc, free):
    for g in range(free.shape[0]):  # noqa: SIM110 (plain loops compile best)
        if free[g, 0] >= minc[g]:
            return False
    return True


@njit(cache=True)
def _easy_ordered(ji, need, minc, ip, sc, js, heap, plan, tree, wheap, free, urun, tmp, order,
                  k):
    """EASY over a sorted list of waiting jobs (dynamic and Python policies)."""
    now = sc[NOW]
    shadow, gh = _easy_begin(ji, need, ip, sc, js, plan, free, tmp, order[k])
    for i in range(k + 1, order.shape[0]):
        if _nothing_fits(minc, free):
            break
        j = order[i]
        if not _allowed(ji, ip, urun, j):
            continue
        g = _easy_group(need, free, tmp, j, gh, now + ji[LENGTH, j] <= shadow)
        if g >= 0:
            _start(ji, need, ip, sc, js, heap, plan, tree, wheap, free, urun, j, g, 1)


# ---------------------------------------------------------------- conservative
@njit(cache=True)
def _prof_fits(prof_f, i, g, need, j):
    for r in range(4):  # noqa: SIM110 (plain loops compile best)
        if need[j, g, r] > prof_f[i, g, r]:
            return False
    return True


@njit(cache=True)
def _earliest(ji, need, prof_t, prof_f, size, j, g):
    """Index of the first breakpoint where job j fits in group g for its planning length."""
    i = 0
    while i < size:
        if not _prof_fits(prof_f, i, g, need, j):
            i += 1
            continue
        end = prof_t[i] + ji[LENGTH, j]
        k = i + 1
        ok = True
        while k < size and prof_t[k] < end:
            if not _prof_fits(prof_f, k, g, need, j):
                ok = False
                break
            k += 1
        if ok:
            return i
        i = k + 1
    return -1


@njit(cache=True)
def _copy_breakpoint(prof_f, dst, src):
    for g in range(prof_f.shape[1]):
        for r in range(4):
            prof_f[dst, g, r] = prof_f[src, g, r]


@njit(cache=True)
def _reserve(ji, need, prof_t, prof_f, size, i0, g, j):
    end = prof_t[i0] + ji[LENGTH, j]
    k = i0
    while k < size and prof_t[k] < end:
        k += 1
    if k == size or prof_t[k] != end:
        for i in range(size, k, -1):
            prof_t[i] = prof_t[i - 1]
            _copy_breakpoint(prof_f, i, i - 1)
        prof_t[k] = end
        _copy_breakpoint(prof_f, k, k - 1)
        size += 1
    for i in range(i0, k):
        for r in range(4):
            prof_f[i, g, r] -= need[j, g, r]
    return size


@njit(cache=True)
def _profile(need, sc, js, plan, free, prof_t, prof_f):
    """Free resources over time from the running jobs' requested ends; its size."""
    now = sc[NOW]
    G = free.shape[0]
    prof_t[0] = now
    for g in range(G):
        for r in range(4):
            prof_f[0, g, r] = free[g, r]
    size = 1
    for i in range(sc[PLO], sc[PHI]):
        t = max(plan[0, i], now + 1)
        if t != prof_t[size - 1]:
            prof_t[size] = t
            _copy_breakpoint(prof_f, size, size - 1)
            size += 1
        j = plan[1, i]
        g = js[GRP, j]
        for r in range(4):
            prof_f[size - 1, g, r] += need[j, g, r]
    return size


@njit(cache=True)
def _place(ji, need, ip, sc, js, heap, plan, tree, wheap, free, urun, prof_t, prof_f, size, j):
    """Reserve job j at its earliest fit (first group on ties); start it if that is now."""
    best_i, best_g = -1, -1
    for g in range(free.shape[0]):
        if need[j, g, 0] < 0:
            continue
        e = _earliest(ji, need, prof_t, prof_f, size, j, g)
        if e >= 0 and (best_g < 0 or prof_t[e] < prof_t[best_i]):
            best_i, best_g = e, g
    if best_g < 0:
        return size  # out of capacity (an outage) on the whole profile: no reservation
    t = prof_t[best_i]
    size = _reserve(ji, need, prof_t, prof_f, size, best_i, best_g, j)
    if t == sc[NOW]:
        _start(ji, need, ip, sc, js, heap, plan, tree, wheap, free, urun, j, best_g, 1)
    return size


@njit(cache=True)
def _conservative_ranked(ji, need, ip, sc, js, heap, plan, tree, wheap, free, urun, prof_t,
                         prof_f, pos):
    size = _profile(need, sc, js, plan, free, prof_t, prof_f)
    p = pos
    while True:
        # Stop when no waiting job from p on needs fewer cores than are free now.
        if tree_find(tree, p, _max_free_cores(prof_f[0]), BIG, -1) < 0:
            break
        p = tree_find(tree, p, BIG - 1, BIG, -1)
        if _allowed(ji, ip, urun, ji[BY_RANK, p]):
            size = _place(ji, need, ip, sc, js, heap, plan, tree, wheap, free, urun, prof_t,
                          prof_f, size, ji[BY_RANK, p])
        p += 1


@njit(cache=True)
def _conservative_ordered(ji, need, ip, sc, js, heap, plan, tree, wheap, free, urun, prof_t,
                          prof_f, smin, order, k):
    size = _profile(need, sc, js, plan, free, prof_t, prof_f)
    G = free.shape[0]
    q = order.shape[0]
    for g in range(G):
        smin[q, g] = BIG
    for i in range(q - 1, k - 1, -1):
        j = order[i]
        for g in range(G):
            c = need[j, g, 0]
            smin[i, g] = min(smin[i + 1, g], c if c >= 0 else BIG)
    for i in range(k, q):
        stop = True
        for g in range(G):
            if prof_f[0, g, 0] >= smin[i, g]:
                stop = False
                break
        if stop:
            break
        if _allowed(ji, ip, urun, order[i]):
            size = _place(ji, need, ip, sc, js, heap, plan, tree, wheap, free, urun, prof_t,
                          prof_f, size, order[i])


# ---------------------------------------------------------------- passes
@njit(cache=True, inline="always")
def _pass_ranked(ji, need, minc, ip, sc, js, heap, plan, tree, wheap, free, urun, tmp, prof_t,
                 prof_f):
    """A scheduling pass of a static policy: start the best jobs while they fit, then
    backfill around the first that does not (jobs held back by running limits are passed
    over, as Slurm does: they neither start nor hold a reservation)."""
    while sc[NWAIT] > 0:
        if _by_heap(ip):
            pos = -1
            j = wheap[1, 0]
        else:
            pos = tree_find(tree, sc[FIRST], BIG - 1, BIG, -1)
            sc[FIRST] = pos  # no job waits at a smaller rank
            while pos >= 0 and not _allowed(ji, ip, urun, ji[BY_RANK, pos]):
                pos = tree_find(tree, pos + 1, BIG - 1, BIG, -1)
            if pos < 0:
                return
            j = ji[BY_RANK, pos]
        g = fit_group(need, free, j)
        if g < 0:
            if ip[IP_BACKFILL] == EASY:
                _easy_ranked(ji, need, minc, ip, sc, js, heap, plan, tree, wheap, free, urun, tmp,
                             j, pos)
            elif ip[IP_BACKFILL] == CONSERVATIVE:
                _conservative_ranked(ji, need, ip, sc, js, heap, plan, tree, wheap, free, urun,
                                     prof_t, prof_f, pos)
            return
        _start(ji, need, ip, sc, js, heap, plan, tree, wheap, free, urun, j, g, 0)


@njit(cache=True)
def _backfill_ordered(ji, need, minc, ip, sc, js, heap, plan, tree, wheap, free, urun, tmp,
                      prof_t, prof_f, smin, order, k):
    if ip[IP_BACKFILL] == EASY:
        _easy_ordered(ji, need, minc, ip, sc, js, heap, plan, tree, wheap, free, urun, tmp, order,
                      k)
    elif ip[IP_BACKFILL] == CONSERVATIVE:
        _conservative_ordered(ji, need, ip, sc, js, heap, plan, tree, wheap, free, urun, prof_t,
                              prof_f, smin, order, k)


# ---------------------------------------------------------------- entry points
@njit(cache=True)
def run_to_end(J, S):
    """Run a built-in policy until every job has started and ended."""
    BJ, BS = unpack(J, S)
    ji, need, a, minc, ip, fp, cap = BJ
    (sc, js, heap, plan, tree, wheap, queue, order, scores, free, tmp, prof_t, prof_f, smin,
     fs, urun) = BS
    static = ip[IP_KIND] == STATIC
    while _advance(ji, need, ip, cap, sc, js, heap, plan, tree, wheap, queue, free, fs, urun):
        sc[PASSES] += 1
        if sc[NWAIT] == 0:
            continue
        sc[DECISIONS] += 1
        if static:
            _pass_ranked(ji, need, minc, ip, sc, js, heap, plan, tree, wheap, free, urun, tmp,
                         prof_t, prof_f)
            continue
        q = sc[NWAIT]
        now = sc[NOW]
        for i in range(q):
            scores[i] = dynamic_score(ji, a, ip, fp, fs, queue[sc[QH] + i], now)
        view = _sorted_by_scores(sc, queue, order, scores, q)
        k = 0
        while k < q:
            j = view[k]
            if not _allowed(ji, ip, urun, j):
                k += 1
                continue
            g = fit_group(need, free, j)
            if g < 0:
                break
            _start(ji, need, ip, sc, js, heap, plan, tree, wheap, free, urun, j, g, 0)
            k += 1
        if k < q:
            _backfill_ordered(ji, need, minc, ip, sc, js, heap, plan, tree, wheap, free, urun,
                              tmp, prof_t, prof_f, smin, view, k)
        _compact(sc, js, queue)


@njit(cache=True)
def next_decision(J, S):
    """Advance to the next decision an external policy must take.

    Returns the number of waiting jobs to score (their indices are
    ``S.queue[S.sc[QH]:S.sc[QT]]``, in submit order), or 0 when the run is over.
    """
    BJ, BS = unpack(J, S)
    ji, need, _a, _minc, ip, _fp, cap = BJ
    (sc, js, heap, plan, tree, wheap, queue, _order, _scores, free, _tmp, _prof_t, _prof_f,
     _smin, fs, urun) = BS
    while True:
        if sc[PHASE] == IN_PASS and sc[NWAIT] > 0:
            return sc[NWAIT]
        if not _advance(ji, need, ip, cap, sc, js, heap, plan, tree, wheap, queue, free, fs, urun):
            return 0
        sc[PASSES] += 1
        sc[PHASE] = IN_PASS


@njit(cache=True)
def decide(J, S):
    """Apply the scores in ``S.scores[:q]``: start the best job if it fits (and stay in the
    pass for the next decision), else backfill around it and wait for the next event."""
    BJ, BS = unpack(J, S)
    ji, need, _a, minc, ip, _fp, _cap = BJ
    (sc, js, heap, plan, tree, wheap, queue, order, scores, free, tmp, prof_t, prof_f, smin,
     _fs, urun) = BS
    q = sc[NWAIT]
    view = _sorted_by_scores(sc, queue, order, scores, q)
    sc[DECISIONS] += 1
    k = 0
    while k < q and not _allowed(ji, ip, urun, view[k]):  # held back by running limits
        k += 1
    g = fit_group(need, free, view[k]) if k < q else -1
    if g >= 0:
        _start(ji, need, ip, sc, js, heap, plan, tree, wheap, free, urun, view[k], g, 0)
    else:
        if k < q:
            _backfill_ordered(ji, need, minc, ip, sc, js, heap, plan, tree, wheap, free, urun,
                              tmp, prof_t, prof_f, smin, view, k)
        sc[PHASE] = WAITING
    _compact(sc, js, queue)
