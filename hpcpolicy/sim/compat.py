"""RLScheduler's engine semantics (``compat="rlscheduler"``), to replay its published figures.

DIR-LAB/deep-batch-scheduler (Zhang et al., SC20) schedules differently from this project;
this module reproduces its rules, described here in our own words:

* A decision picks the best-scored waiting job (ties: the earlier job) as the *head*. The head
  stays fixed while it waits for resources: jobs arriving meanwhile, even better-scored ones,
  cannot overtake it (this is what "their SJF" does).
* The clock moves one event at a time: the next arrival if it comes no later than the next
  finish (by actual end), else that finish. After each event the head is tried again.
* Backfilling, if on: when the head does not fit, its reservation is computed once, from the
  running jobs in order of requested end, and kept while it waits. Before each event, the
  waiting jobs are scanned in arrival order and every one that fits now and whose requested
  end is strictly before the reservation starts now. There is no extra-resources rule.
* After the head starts, the next decision happens at the same time; the clock only moves
  on when the queue is empty (to the next arrival) or when a head does not fit.
* Running jobs are kept in a list re-sorted (stably) by actual end before each event and by
  requested end when a reservation is computed; ties therefore follow that list's order,
  which decides the order of equal-time finishes.

There is one implementation, compiled (``SimConfig.engine`` does not apply). Its correctness
is the reproduction of RLScheduler's published figures (tests/test_reproduce_rlscheduler.py).
Planning uses max(requested walltime, 1 s), as everywhere in hpcpolicy; RLScheduler plans
with the request itself, which differs only for jobs requesting 0 s.
"""

# The kernels are typed by numba when compiled; mypy sees untyped functions.
# mypy: disable-error-code="no-untyped-def, no-untyped-call"

from __future__ import annotations

from numba import njit

from hpcpolicy.sim.fast import (
    BACKFILLED,
    BF,
    DECISIONS,
    EVENTS,
    EXTERNAL,
    FAIRSHARE,
    FIN,
    GRP,
    IP_BACKFILL,
    IP_KIND,
    IP_N,
    LENGTH,
    NEVER,
    NEXT,
    NONE,
    NOW,
    PASSES,
    PEND,
    PHASE,
    QH,
    QT,
    RANK,
    RLEN,
    STARTED,
    STATIC,
    SUBMIT,
    dynamic_score,
    fairshare_add,
    fit_group,
    occupy,
    unpack,
)
from hpcpolicy.sim.nbstruct import BIG

__all__ = ["decide", "next_decision", "run_to_end"]


@njit(cache=True)
def _sort_running(sc, js, run, key):
    """Stable insertion sort of the running list by FIN or PEND (nearly sorted: cheap)."""
    for i in range(1, sc[RLEN]):
        x = run[i]
        kx = js[key, x]
        k = i - 1
        while k >= 0 and js[key, run[k]] > kx:
            run[k + 1] = run[k]
            k -= 1
        run[k + 1] = x


@njit(cache=True)
def _next_arrival(ji, ip, sc):
    n = ip[IP_N]
    nxt = sc[NEXT]
    while nxt < n and ji[NEVER, nxt]:
        nxt += 1
    sc[NEXT] = nxt
    return nxt


@njit(cache=True)
def _arrive(ji, sc, queue, j):
    sc[NOW] = max(sc[NOW], ji[SUBMIT, j])
    queue[sc[QT]] = j
    sc[QT] += 1
    sc[NEXT] = j + 1
    sc[EVENTS] += 1


@njit(cache=True)
def _advance_one(ji, need, ip, sc, js, run, queue, free, fs):
    """One event: the next arrival if no later than the next finish, else that finish."""
    nxt = _next_arrival(ji, ip, sc)
    release = BIG
    if sc[RLEN] > 0:
        _sort_running(sc, js, run, FIN)
        release = js[FIN, run[0]]
    if nxt < ip[IP_N] and ji[SUBMIT, nxt] <= release:
        _arrive(ji, sc, queue, nxt)
        return
    j = run[0]
    sc[NOW] = max(sc[NOW], release)
    for i in range(sc[RLEN] - 1):
        run[i] = run[i + 1]
    sc[RLEN] -= 1
    g = js[GRP, j]
    for r in range(4):
        free[g, r] += need[j, g, r]
    if j < ip[IP_N] and ip[IP_KIND] >= FAIRSHARE:  # only these read the usage
        fairshare_add(ji, need, ip, sc, js, fs, j)
    sc[EVENTS] += 1


@njit(cache=True)
def _start(ji, need, sc, js, run, free, j, g, backfilled):
    now = sc[NOW]
    occupy(ji, need, js, free, j, g, now)
    run[sc[RLEN]] = j
    sc[RLEN] += 1
    sc[STARTED] += 1
    if backfilled:
        js[BF, j] = 1
        sc[BACKFILLED] += 1


@njit(cache=True)
def _remove(sc, queue, pos):
    for i in range(pos, sc[QT] - 1):
        queue[i] = queue[i + 1]
    sc[QT] -= 1


@njit(cache=True)
def _fill(ji, need, ip, sc, js, run, queue, free, fs):
    """Start the run, or move on to the next arrival when the queue is empty. False at the end."""
    if sc[PHASE] == 0:
        sc[PHASE] = 1
        nxt = _next_arrival(ji, ip, sc)
        if nxt < ip[IP_N]:
            sc[NOW] = ji[SUBMIT, nxt]
            _arrive(ji, sc, queue, nxt)
    if sc[QT] > sc[QH]:
        return True
    if _next_arrival(ji, ip, sc) >= ip[IP_N]:
        return False
    while sc[QT] == sc[QH]:
        _advance_one(ji, need, ip, sc, js, run, queue, free, fs)
    return True


@njit(cache=True)
def _reservation(need, sc, js, run, free, tmp, head):
    """The head's planned start: walk the running jobs by requested end until it would fit."""
    _sort_running(sc, js, run, PEND)
    for g in range(free.shape[0]):
        for r in range(4):
            tmp[g, r] = free[g, r]
    earliest = sc[NOW]
    for i in range(sc[RLEN]):
        j = run[i]
        g = js[GRP, j]
        for r in range(4):
            tmp[g, r] += need[j, g, r]
        earliest = js[PEND, j]
        if fit_group(need, tmp[:free.shape[0]], head) >= 0:
            break
    return earliest


@njit(cache=True)
def _run_head(ji, need, ip, sc, js, run, queue, free, tmp, fs, head):
    """Wait (backfilling if on) until the head fits, then start it."""
    if fit_group(need, free, head) < 0:
        if ip[IP_BACKFILL] != NONE:
            earliest = _reservation(need, sc, js, run, free, tmp, head)
            while fit_group(need, free, head) < 0:
                i = sc[QH]
                while i < sc[QT]:
                    j = queue[i]
                    if sc[NOW] + ji[LENGTH, j] < earliest:
                        g = fit_group(need, free, j)
                        if g >= 0:
                            _start(ji, need, sc, js, run, free, j, g, 1)
                            _remove(sc, queue, i)
                            continue
                    i += 1
                _advance_one(ji, need, ip, sc, js, run, queue, free, fs)
        else:
            while fit_group(need, free, head) < 0:
                _advance_one(ji, need, ip, sc, js, run, queue, free, fs)
    _start(ji, need, sc, js, run, free, head, fit_group(need, free, head), 0)
    for i in range(sc[QH], sc[QT]):
        if queue[i] == head:
            _remove(sc, queue, i)
            break


@njit(cache=True)
def _choose(ji, a, ip, fp, sc, queue, scores, fs):
    """The best-scored waiting job (ties: the earlier job)."""
    kind = ip[IP_KIND]
    now = sc[NOW]
    best, best_pos = 0.0, -1
    for i in range(sc[QH], sc[QT]):
        j = queue[i]
        if kind == STATIC:
            s = float(ji[RANK, j])
        elif kind == EXTERNAL:
            s = scores[i - sc[QH]]
        else:
            s = dynamic_score(ji, a, ip, fp, fs, j, now)
        if best_pos < 0 or s < best:
            best, best_pos = s, i
    return queue[best_pos]


@njit(cache=True)
def run_to_end(J, S):
    """Run a built-in policy with RLScheduler's semantics to the end."""
    BJ, BS = unpack(J, S)
    ji, need, a, _minc, ip, fp, _cap = BJ
    (sc, js, _heap, plan, _tree, _wheap, queue, _order, scores, free, tmp, _prof_t, _prof_f,
     _smin, fs, _urun) = BS
    run = plan[1]
    while _fill(ji, need, ip, sc, js, run, queue, free, fs):
        sc[PASSES] += 1
        sc[DECISIONS] += 1
        head = _choose(ji, a, ip, fp, sc, queue, scores, fs)
        _run_head(ji, need, ip, sc, js, run, queue, free, tmp, fs, head)


@njit(cache=True)
def next_decision(J, S):
    """Number of waiting jobs to score for the next head choice; 0 at the end."""
    BJ, BS = unpack(J, S)
    ji, need, _a, _minc, ip, _fp, _cap = BJ
    (sc, js, _heap, plan, _tree, _wheap, queue, _order, _scores, free, _tmp, _prof_t, _prof_f,
     _smin, fs, _urun) = BS
    if not _fill(ji, need, ip, sc, js, plan[1], queue, free, fs):
        return 0
    sc[PASSES] += 1
    return sc[QT] - sc[QH]


@njit(cache=True)
def decide(J, S):
    """Make the best of ``S.scores[:q]`` the head and run until it has started."""
    BJ, BS = unpack(J, S)
    ji, need, a, _minc, ip, fp, _cap = BJ
    (sc, js, _heap, plan, _tree, _wheap, queue, _order, scores, free, tmp, _prof_t, _prof_f,
     _smin, fs, _urun) = BS
    sc[DECISIONS] += 1
    head = _choose(ji, a, ip, fp, sc, queue, scores, fs)
    _run_head(ji, need, ip, sc, js, plan[1], queue, free, tmp, fs, head)
