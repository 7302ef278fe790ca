"""Cores on nodes as ``select/cons_tres`` places them, compiled (numba).

The rule is :func:`hpcpolicy.slurm.replay.place`'s (Slurm 22.05, no topology, equal node
weights), on arrays: the usable nodes form runs of consecutive indices; the run taken first is
the one with the fewest free cores among those that can hold the job, else the one with the
most; in it, a one-node job takes the fullest node that holds it (lowest index on ties), and a
job of several nodes takes the nodes in index order, each as many cores as it has while
leaving one per node still to come, the last node being the first that holds the rest. Runs
are used until the job has its nodes.

A job that names no node count (``nodes`` 0, as SWF logs) goes on one node where one holds
it (as a one-node job), else takes cores node after node through the runs, in the same run
order, until it has them all: Slurm without ``-N`` spreads over as many nodes as it needs.
"""

# The kernels are typed by numba when compiled; mypy sees untyped functions.
# mypy: disable-error-code="no-untyped-def, no-untyped-call"

from __future__ import annotations

from numba import njit

__all__ = ["place"]


@njit(cache=True)
def _runs(free, nodes, count, mark, stamp, run_lo, run_hi):
    """Runs of consecutive node indices among ``nodes[:count]`` (ascending) that have a free
    core and are not blocked (``mark[n] == stamp``), as [run_lo[k], run_hi[k]) positions in
    ``nodes``; how many."""
    n_runs = 0
    prev = -2
    for i in range(count):
        n = nodes[i]
        if free[n] <= 0 or mark[n] == stamp:
            continue
        if n_runs > 0 and n == prev + 1:
            run_hi[n_runs - 1] = i + 1
        else:
            run_lo[n_runs] = i
            run_hi[n_runs] = i + 1
            n_runs += 1
        prev = n
    return n_runs


@njit(cache=True)
def _single(free, nodes, lo, hi, cores):
    """The fullest node of ``nodes[lo:hi]`` that holds ``cores`` (lowest index on ties), or
    -1."""
    best = -1
    for i in range(lo, hi):
        n = nodes[i]
        if free[n] >= cores and (best < 0 or free[n] < free[best]):
            best = n
    return best


@njit(cache=True)
def _pick(free, nodes, run_lo, run_hi, n_runs, used, left, want, flexible):
    """The next run to use: the fewest free cores among those that hold the rest of the job
    (first on ties), else the most free cores (first on ties)."""
    pick, pick_sum, pick_holds = -1, 0, False
    for k in range(n_runs):
        if used[k]:
            continue
        total = 0
        for i in range(run_lo[k], run_hi[k]):
            total += free[nodes[i]]
        holds = total >= left and (flexible or run_hi[k] - run_lo[k] >= want)
        if pick < 0 or (holds and not pick_holds) or (
                holds and pick_holds and total < pick_sum) or (
                not holds and not pick_holds and total > pick_sum):
            pick, pick_sum, pick_holds = k, total, holds
    return pick


@njit(cache=True)
def place(free, nodes, count, mark, stamp, cores, want_nodes, take_node, take_cores, scratch):
    """Place ``cores`` cores on ``want_nodes`` nodes (0: as many as needed) of
    ``nodes[:count]``, skipping the blocked ones (``mark[n] == stamp``), given ``free`` cores
    per node.

    Writes the chosen nodes and their cores to ``take_node``/``take_cores`` and returns how
    many nodes were taken, or -1 when the job does not fit (the outputs are then garbage).
    ``free`` is not changed. ``scratch``: an int64 array of 3 x (count + 1) entries at least.
    """
    run_lo = scratch[0]
    run_hi = scratch[1]
    used = scratch[2]
    n_runs = _runs(free, nodes, count, mark, stamp, run_lo, run_hi)
    used[:n_runs] = 0
    flexible = want_nodes <= 0
    if flexible:
        best = -1
        for k in range(n_runs):
            cand = _single(free, nodes, run_lo[k], run_hi[k], cores)
            if cand >= 0 and (best < 0 or free[cand] < free[best]):
                best = cand
        if best >= 0:
            take_node[0] = best
            take_cores[0] = cores
            return 1
    left, want, taken = cores, want_nodes, 0
    for _ in range(n_runs):
        if left <= 0 or (want == 0 and not flexible):
            break
        k = _pick(free, nodes, run_lo, run_hi, n_runs, used, left, want, flexible)
        used[k] = 1
        lo, hi = run_lo[k], run_hi[k]
        if want == 1 and not flexible:
            one = _single(free, nodes, lo, hi, left)
            if one >= 0:  # the fullest node of the run that holds the rest
                lo, hi = 0, 0
                take_node[taken] = one
                take_cores[taken] = left
                taken += 1
                left, want = 0, 0
        for i in range(lo, hi):
            if want == 0 and not flexible:
                break
            if left <= 0:
                break
            n = nodes[i]
            if not flexible and want == 1 and free[n] < left:
                continue
            use = min(free[n], left) if flexible else max(1, min(free[n], left - (want - 1)))
            take_node[taken] = n
            take_cores[taken] = use
            taken += 1
            left -= use
            want -= 1
    if left <= 0 and (flexible or want == 0):
        return taken
    return -1
