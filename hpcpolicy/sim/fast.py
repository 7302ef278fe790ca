"""The compiled engine (numba): the project's semantics on flat arrays.

Same rules as :mod:`hpcpolicy.sim.reference`, written for speed:

* running jobs sit in a binary heap keyed by (actual end, job) for finish events, and in an
  array sorted by (requested end, job) that planning walks (EASY shadow time, conservative
  profile) without sorting;
* waiting jobs of a static policy are kept sorted by the policy's rank, so a scheduling pass
  reads the order instead of sorting; dynamic policies (WFP3, UNICEP, fair share) are scored
  and stably sorted at each pass;
* conservative backfilling rebuilds its availability profile (breakpoints x groups x
  resources) at each pass and stops placing reservations as soon as no remaining job could
  start now — the later reservations could not change this pass's decisions.

The data live in two namedtuples of arrays, :data:`Jobs` (read-only) and :data:`State`
(mutable; scalars in ``State.sc``), so that a run can stop at a decision and resume:
:func:`run_to_end` runs a built-in policy to the end in one call, while :func:`next_decision`
and :func:`decide` hand each decision to Python (a learned policy, the RL environment).
Only those three entry points take the namedtuples; they unpack them once and every helper
takes plain arrays, because numba reference-counts each array it pulls out of a tuple — in a
loop of millions of events that costs more than the scheduling itself. (For the same reason
no helper swaps array elements with tuple assignment.) Violations of the ``check``
invariants are recorded in ``State.sc`` (VIOL*) and raised by the caller.
"""

from __future__ import annotations

import math
from collections import namedtuple

import numpy as np
from numba import njit, types
from numba.extending import intrinsic
from numba.np.arrayobj import make_array, populate_array

__all__ = ["Jobs", "State", "decide", "next_decision", "run_to_end"]

BIG = np.int64(1) << np.int64(62)
LN2 = math.log(2.0)
SCALE_DOWN = 2.0 ** -256

# Kernel kinds (hpcpolicy.policies.base.KERNEL_KINDS order) and the stepping mode.
STATIC, WFP3, UNICEP, FAIRSHARE, EXTERNAL = 0, 1, 2, 3, 4
NONE, EASY, CONSERVATIVE = 0, 1, 2

# Rows of Jobs.ji (per workload job).
SUBMIT, DUR, LENGTH, USER, RANK, NEVER = range(6)
# Jobs.ip: integer parameters.
IP_KIND, IP_BACKFILL, IP_CHECK, IP_N, IP_M, IP_HALF_LIFE, IP_MAX_AGE = range(7)
# Jobs.fp: float parameters.
FP_W_FS, FP_W_AGE, FP_N_USERS = range(3)

# Rows of State.js (per job, running-at-start jobs included).
START, FIN, PEND, GRP, BF = range(5)
# State.sc: scalars.
(NOW, QH, QT, HLEN, PLEN, NEXT, EVENTS, PASSES, STARTED, BACKFILLED, DECISIONS, OVERRUNS,
 RES_HEAD, RES_T, RES_OVR, VIOL, VIOL_J, VIOL_T, PHASE, T0, MIDSTART, RLEN) = range(22)
N_SCALARS = 24
# State.sc[VIOL] codes.
VIOL_RESERVATION_LATER, VIOL_HEAD_LATE = 1, 2
# State.sc[PHASE]: waiting for the next event, or inside a scheduling pass.
WAITING, IN_PASS = 0, 1

Jobs = namedtuple("Jobs", ["ji", "need", "a", "minc", "ip", "fp"])
"""Read-only: ji (6, n) rows SUBMIT..NEVER; need (N, G, 4); a (n,) kernel coefficient;
minc (G,) smallest core demand per group; ip / fp parameters."""

State = namedtuple("State", ["sc", "js", "heap", "plan", "queue", "order", "scores", "free",
                             "tmp", "prof_t", "prof_f", "smin", "fs"])
"""Mutable: sc scalars; js (5, N) rows START..BF; heap (2, N) and plan (2, N) as (time, job)
rows; queue, order (n,); scores (n,); free (G, 4); tmp (G + 1, 4), the last row holding
EASY's extra resources; prof_t (P,), prof_f (P, G, 4) the conservative profile; smin
(n + 1, G); fs (users + 1,) decayed usage per user, then the total."""


# ---------------------------------------------------------------- borrowed arrays
@intrinsic
def _borrow(typingctx, arr):
    """The same array without its reference-count handle (meminfo = NULL).

    numba increments and decrements an array's reference count (an atomic operation) each
    time a function receives or passes it; in the event loop that cost more than the
    scheduling. A borrowed view skips it. Only the entry points borrow, for the duration of
    one call, while the caller's namedtuples keep the arrays alive; nothing borrowed escapes.
    """
    if not isinstance(arr, types.Array):
        return None

    def codegen(context, builder, sig, args):
        src = make_array(sig.args[0])(context, builder, args[0])
        out = make_array(sig.return_type)(context, builder)
        populate_array(out, data=src.data, shape=src.shape, strides=src.strides,
                       itemsize=src.itemsize, meminfo=None)
        return out._getvalue()

    return arr(arr), codegen


@njit(cache=True)
def _unpack(J, S):
    """Borrowed views of every array of a run."""
    ji, need, a, minc, ip, fp = J
    sc, js, heap, plan, queue, order, scores, free, tmp, prof_t, prof_f, smin, fs = S
    return ((_borrow(ji), _borrow(need), _borrow(a), _borrow(minc), _borrow(ip), _borrow(fp)),
            (_borrow(sc), _borrow(js), _borrow(heap), _borrow(plan), _borrow(queue),
             _borrow(order), _borrow(scores), _borrow(free), _borrow(tmp), _borrow(prof_t),
             _borrow(prof_f), _borrow(smin), _borrow(fs)))


# ---------------------------------------------------------------- resources and groups
@njit(cache=True)
def _fits(need, free, j, g):
    if need[j, g, 0] < 0:
        return False
    for r in range(4):
        if need[j, g, r] > free[g, r]:
            return False
    return True


@njit(cache=True)
def _pick(need, free, j):
    for g in range(free.shape[0]):
        if _fits(need, free, j, g):
            return g
    return -1


# ---------------------------------------------------------------- (time, job) heap and list
@njit(cache=True)
def _before(ta, ja, tb, jb):
    return ta < tb or (ta == tb and ja < jb)


@njit(cache=True)
def _heap_push(heap, size, t, j):
    i = size
    while i > 0:
        p = (i - 1) >> 1
        if not _before(t, j, heap[0, p], heap[1, p]):
            break
        heap[0, i] = heap[0, p]
        heap[1, i] = heap[1, p]
        i = p
    heap[0, i] = t
    heap[1, i] = j
    return size + 1


@njit(cache=True)
def _heap_pop(heap, size):
    size -= 1
    t, j = heap[0, size], heap[1, size]
    i = 0
    while True:
        c = 2 * i + 1
        if c >= size:
            break
        if c + 1 < size and _before(heap[0, c + 1], heap[1, c + 1], heap[0, c], heap[1, c]):
            c += 1
        if not _before(heap[0, c], heap[1, c], t, j):
            break
        heap[0, i] = heap[0, c]
        heap[1, i] = heap[1, c]
        i = c
    heap[0, i] = t
    heap[1, i] = j
    return size


@njit(cache=True)
def _plan_find(plan, size, t, j):
    lo, hi = 0, size
    while lo < hi:
        mid = (lo + hi) >> 1
        if _before(plan[0, mid], plan[1, mid], t, j):
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit(cache=True)
def _plan_insert(plan, size, t, j):
    k = _plan_find(plan, size, t, j)
    for i in range(size, k, -1):
        plan[0, i] = plan[0, i - 1]
        plan[1, i] = plan[1, i - 1]
    plan[0, k] = t
    plan[1, k] = j
    return size + 1


@njit(cache=True)
def _plan_remove(plan, size, t, j):
    k = _plan_find(plan, size, t, j)
    for i in range(k, size - 1):
        plan[0, i] = plan[0, i + 1]
        plan[1, i] = plan[1, i + 1]
    return size - 1


# ---------------------------------------------------------------- queue
@njit(cache=True)
def _queue_insert(ji, ip, sc, queue, j):
    qh, qt = sc[QH], sc[QT]
    if ip[IP_KIND] == STATIC:
        r = ji[RANK, j]
        lo, hi = qh, qt
        while lo < hi:
            mid = (lo + hi) >> 1
            if ji[RANK, queue[mid]] < r:
                lo = mid + 1
            else:
                hi = mid
        for i in range(qt, lo, -1):
            queue[i] = queue[i - 1]
        queue[lo] = j
    else:
        queue[qt] = j
    sc[QT] = qt + 1


@njit(cache=True)
def _compact(sc, js, queue):
    """Drop started jobs from the queue (a prefix cheaply, the rest if some started mid-way)."""
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
@njit(cache=True)
def _fairshare_add(ji, need, ip, sc, js, fs, j):
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
@njit(cache=True)
def _trusted(sc, plan):
    """No running job is past its requested end and none ended late since the reservation."""
    if sc[OVERRUNS] != sc[RES_OVR]:
        return False
    return sc[PLEN] == 0 or plan[0, 0] > sc[NOW]


@njit(cache=True)
def _start(ji, need, ip, sc, js, heap, plan, free, j, g, backfilled):
    now = sc[NOW]
    if ip[IP_CHECK] and not backfilled and j == sc[RES_HEAD]:
        if _trusted(sc, plan) and now > sc[RES_T] and sc[VIOL] == 0:
            sc[VIOL] = VIOL_HEAD_LATE
            sc[VIOL_J] = j
            sc[VIOL_T] = now
        sc[RES_HEAD] = -1
    js[START, j] = now
    js[FIN, j] = now + ji[DUR, j]
    js[PEND, j] = now + ji[LENGTH, j]
    js[GRP, j] = g
    for r in range(4):
        free[g, r] -= need[j, g, r]
    sc[HLEN] = _heap_push(heap, sc[HLEN], js[FIN, j], j)
    if ip[IP_BACKFILL] != NONE:
        sc[PLEN] = _plan_insert(plan, sc[PLEN], js[PEND, j], j)
    sc[STARTED] += 1
    if backfilled:
        js[BF, j] = 1
        sc[BACKFILLED] += 1
    if backfilled or ip[IP_KIND] != STATIC:
        sc[MIDSTART] = 1


# ---------------------------------------------------------------- events
@njit(cache=True)
def _advance(ji, need, ip, sc, js, heap, plan, queue, free, fs):
    """Jump to the next event time; apply its finishes, then its submits. False when none."""
    n = ip[IP_N]
    nxt = sc[NEXT]
    while nxt < n and ji[NEVER, nxt]:
        nxt += 1
    t = ji[SUBMIT, nxt] if nxt < n else BIG
    if sc[HLEN] > 0 and heap[0, 0] < t:
        t = heap[0, 0]
    if t == BIG:
        sc[NEXT] = nxt
        return False
    sc[NOW] = t
    while sc[HLEN] > 0 and heap[0, 0] == t:
        j = heap[1, 0]
        sc[HLEN] = _heap_pop(heap, sc[HLEN])
        g = js[GRP, j]
        for r in range(4):
            free[g, r] += need[j, g, r]
        if ip[IP_BACKFILL] != NONE:
            sc[PLEN] = _plan_remove(plan, sc[PLEN], js[PEND, j], j)
        if js[FIN, j] > js[PEND, j]:
            sc[OVERRUNS] += 1
        if j < n:
            _fairshare_add(ji, need, ip, sc, js, fs, j)
        sc[EVENTS] += 1
    while nxt < n and ji[SUBMIT, nxt] == t:
        if not ji[NEVER, nxt]:
            _queue_insert(ji, ip, sc, queue, nxt)
            sc[EVENTS] += 1
        nxt += 1
    sc[NEXT] = nxt
    return True


# ---------------------------------------------------------------- scoring
@njit(cache=True)
def _score(ji, a, ip, fp, fs, j, now):
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


# ---------------------------------------------------------------- backfilling
@njit(cache=True)
def _shadow(need, sc, js, plan, free, tmp, head):
    """Earliest planned (time, group) for the head; its extra resources go to tmp[-1]."""
    now = sc[NOW]
    G = free.shape[0]
    for g in range(G):
        for r in range(4):
            tmp[g, r] = free[g, r]
    i, size = 0, sc[PLEN]
    while i < size:
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
                return t, g
    return BIG, -1


@njit(cache=True)
def _nothing_fits(minc, free):
    for g in range(free.shape[0]):
        if free[g, 0] >= minc[g]:
            return False
    return True


@njit(cache=True)
def _within(need, tmp, j, g, row):
    """Whether job j's demand in group g fits in tmp[row] (EASY's extra resources)."""
    for r in range(4):
        if need[j, g, r] > tmp[row, r]:
            return False
    return True


@njit(cache=True)
def _easy(ji, need, minc, ip, sc, js, heap, plan, free, tmp, order, k):
    now = sc[NOW]
    head = order[k]
    shadow, gh = _shadow(need, sc, js, plan, free, tmp, head)
    if ip[IP_CHECK]:
        if sc[RES_HEAD] == head and _trusted(sc, plan) and shadow > sc[RES_T] and sc[VIOL] == 0:
            sc[VIOL] = VIOL_RESERVATION_LATER
            sc[VIOL_J] = head
            sc[VIOL_T] = now
        sc[RES_HEAD] = head
        sc[RES_T] = shadow
        sc[RES_OVR] = sc[OVERRUNS]
    G = free.shape[0]
    for i in range(k + 1, order.shape[0]):
        if _nothing_fits(minc, free):
            break
        j = order[i]
        in_time = now + ji[LENGTH, j] <= shadow
        chosen = -1
        for g in range(G):
            if not _fits(need, free, j, g):
                continue
            if g != gh or in_time:
                chosen = g
                break
            if _within(need, tmp, j, g, G):
                for r in range(4):
                    tmp[G, r] -= need[j, g, r]
                chosen = g
                break
        if chosen >= 0:
            _start(ji, need, ip, sc, js, heap, plan, free, j, chosen, 1)


@njit(cache=True)
def _prof_fits(prof_f, i, g, need, j):
    for r in range(4):
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
def _conservative(ji, need, ip, sc, js, heap, plan, free, prof_t, prof_f, smin, order, k):
    now = sc[NOW]
    G = free.shape[0]
    q = order.shape[0]
    prof_t[0] = now
    for g in range(G):
        for r in range(4):
            prof_f[0, g, r] = free[g, r]
    size = 1
    for i in range(sc[PLEN]):
        t = max(plan[0, i], now + 1)
        if t != prof_t[size - 1]:
            prof_t[size] = t
            _copy_breakpoint(prof_f, size, size - 1)
            size += 1
        j = plan[1, i]
        g = js[GRP, j]
        for r in range(4):
            prof_f[size - 1, g, r] += need[j, g, r]
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
        j = order[i]
        best_i, best_g = -1, -1
        for g in range(G):
            if need[j, g, 0] < 0:
                continue
            e = _earliest(ji, need, prof_t, prof_f, size, j, g)
            if best_g < 0 or prof_t[e] < prof_t[best_i]:
                best_i, best_g = e, g
        t = prof_t[best_i]
        size = _reserve(ji, need, prof_t, prof_f, size, best_i, best_g, j)
        if t == now:
            _start(ji, need, ip, sc, js, heap, plan, free, j, best_g, 1)


@njit(cache=True)
def _backfill(ji, need, minc, ip, sc, js, heap, plan, free, tmp, prof_t, prof_f, smin,
              order, k):
    mode = ip[IP_BACKFILL]
    if mode == EASY:
        _easy(ji, need, minc, ip, sc, js, heap, plan, free, tmp, order, k)
    elif mode == CONSERVATIVE:
        _conservative(ji, need, ip, sc, js, heap, plan, free, prof_t, prof_f, smin, order, k)


# ---------------------------------------------------------------- entry points
@njit(cache=True)
def run_to_end(J, S):
    """Run a built-in policy until every job has started and ended."""
    BJ, BS = _unpack(J, S)
    ji, need, a, minc, ip, fp = BJ
    sc, js, heap, plan, queue, order, scores, free, tmp, prof_t, prof_f, smin, fs = BS
    static = ip[IP_KIND] == STATIC
    while _advance(ji, need, ip, sc, js, heap, plan, queue, free, fs):
        sc[PASSES] += 1
        q = sc[QT] - sc[QH]
        if q == 0:
            continue
        now = sc[NOW]
        if static:
            view = queue[sc[QH]:sc[QT]]
        else:
            for i in range(q):
                scores[i] = _score(ji, a, ip, fp, fs, queue[sc[QH] + i], now)
            view = _sorted_by_scores(sc, queue, order, scores, q)
        sc[DECISIONS] += 1
        k = 0
        while k < q:
            j = view[k]
            g = _pick(need, free, j)
            if g < 0:
                break
            _start(ji, need, ip, sc, js, heap, plan, free, j, g, 0)
            k += 1
        if k < q:
            _backfill(ji, need, minc, ip, sc, js, heap, plan, free, tmp, prof_t, prof_f, smin,
                      view, k)
        _compact(sc, js, queue)


@njit(cache=True)
def next_decision(J, S):
    """Advance to the next decision an external policy must take.

    Returns the number of waiting jobs to score (their indices are
    ``S.queue[S.sc[QH]:S.sc[QT]]``, in submit order), or 0 when the run is over.
    """
    BJ, BS = _unpack(J, S)
    ji, need, a, minc, ip, fp = BJ
    sc, js, heap, plan, queue, order, scores, free, tmp, prof_t, prof_f, smin, fs = BS
    while True:
        q = sc[QT] - sc[QH]
        if sc[PHASE] == IN_PASS and q > 0:
            return q
        if not _advance(ji, need, ip, sc, js, heap, plan, queue, free, fs):
            return 0
        sc[PASSES] += 1
        sc[PHASE] = IN_PASS


@njit(cache=True)
def decide(J, S):
    """Apply the scores in ``S.scores[:q]``: start the best job if it fits (and stay in the
    pass for the next decision), else backfill around it and wait for the next event."""
    BJ, BS = _unpack(J, S)
    ji, need, a, minc, ip, fp = BJ
    sc, js, heap, plan, queue, order, scores, free, tmp, prof_t, prof_f, smin, fs = BS
    q = sc[QT] - sc[QH]
    view = _sorted_by_scores(sc, queue, order, scores, q)
    sc[DECISIONS] += 1
    head = view[0]
    g = _pick(need, free, head)
    if g >= 0:
        _start(ji, need, ip, sc, js, heap, plan, free, head, g, 0)
    else:
        _backfill(ji, need, minc, ip, sc, js, heap, plan, free, tmp, prof_t, prof_f, smin,
                  view, 0)
        sc[PHASE] = WAITING
    _compact(sc, js, queue)
