"""The priority order the log shows: which of the jobs that waited together started first.

At each logged start of a job that had waited, the other jobs then waiting that would also
have fitted in the cores left free (by the logged schedule) were passed over: the scheduler
preferred the one it started. Each such pair is kept as the difference of the two jobs'
multifactor factors (fair share, age, size; as the ``fairshare`` policy computes them at that
time from the logged usage). A weight profile explains a pair when it scores the started job
higher; the profile that explains most pairs of the earlier fitted jobs is the candidate, and
the share it explains on the validation slice, against FCFS's share, is its evidence.
Sizes enter symmetrically (both jobs fitted), so the pairs favour neither large nor small jobs
by construction; backfilling and holds still start some jobs out of priority order, which
lowers every profile's share alike.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from hpcpolicy.sim.fairshare import DecayedUsage
from hpcpolicy.site.evidence import Candidate
from hpcpolicy.workload import Workload

__all__ = ["concordance", "find_priority", "order_pairs"]

F64 = npt.NDArray[np.float64]

WEIGHT_AGE = 1000.0
"""Age weight of every profile tried (the scale; only ratios order the queue)."""
GRID_FAIRSHARE = (0.0, 1000.0, 3000.0, 10000.0, 30000.0)
"""Fair-share weights tried."""
GRID_SIZE = (0.0, 300.0, 1000.0, 3000.0, 10000.0)
"""Job-size weights tried (the profile with both at 0 is FCFS)."""
MAX_EVENTS = 20000
"""Most logged starts read per slice (a seeded sample beyond that)."""
PER_EVENT = 8
"""Most passed-over jobs paired with one start (a seeded sample beyond that)."""
MIN_PAIRS = 200
"""Fewest pairs in each slice for the order to count as evidence."""
DEFAULTS = (10000.0, 1000.0, 1000.0)
"""Fair-share, age and size weights of the ``fairshare`` policy's defaults (Slurm-like)."""
MIN_GAIN = 0.05
"""Smallest rise over FCFS of the share of validation pairs explained for a multifactor
profile to be proposed."""


def order_pairs(w: Workload, lo: int, hi: int, total_cores: int, half_life_s: int,
                max_age_s: int, seed: int = 0) -> F64:
    """Factor differences (started minus passed over; columns fair share, age, size) of the
    pairs at the logged starts of jobs ``lo..hi-1`` that waited.

    The usage behind the fair-share factor is charged at each job's logged end, decaying
    with ``half_life_s``, as the simulator charges it.
    """
    rng = np.random.default_rng(seed)
    sub, st = w.submit.astype(np.int64), w.logged_start.astype(np.int64)
    procs, user = w.procs.astype(np.int64), w.user.astype(np.int64)
    n_users = max(len(w.users), int(user.max(initial=-1)) + 1, 1)
    idx = np.flatnonzero((st >= 0) & (np.arange(len(w)) < hi))
    end = st[idx] + w.run_time[idx].astype(np.int64)
    chosen = np.flatnonzero((idx >= lo) & (st[idx] > sub[idx]))
    if len(chosen) > MAX_EVENTS:
        chosen = np.sort(rng.choice(chosen, MAX_EVENTS, replace=False))
    sampled = np.zeros(len(w), dtype=bool)
    sampled[idx[chosen]] = True
    # events: 0 = end (charges usage, frees cores), 1 = start, 2 = submit (queued if it waited)
    t = np.concatenate((end, st[idx], sub[idx]))
    kind = np.repeat(np.arange(3), len(idx))
    job = np.tile(idx, 3)
    usage = DecayedUsage(n_users, half_life_s)
    waiting: dict[int, None] = {}
    busy = 0
    rows: list[F64] = []
    for e in np.lexsort((kind, t)):
        k, j, now = int(kind[e]), int(job[e]), int(t[e])
        if k == 0:
            busy -= int(procs[j])
            usage.add(int(user[j]), int(procs[j]), int(st[j]), now)
        elif k == 2:
            if st[j] > sub[j]:
                waiting[j] = None
        else:
            free = total_cores - busy
            busy += int(procs[j])
            waiting.pop(j, None)
            if not sampled[j] or not waiting:
                continue
            rivals = np.fromiter(waiting, dtype=np.int64)
            rivals = rivals[procs[rivals] <= free]
            if not len(rivals):
                continue
            if len(rivals) > PER_EVENT:
                rivals = rng.choice(rivals, PER_EVENT, replace=False)
            both = np.concatenate(([j], rivals))
            fs = np.exp2(-usage.shares()[user[both]] * n_users)
            age = np.minimum((now - sub[both]) / max_age_s, 1.0)
            f = np.column_stack((fs, age, procs[both] / total_cores))
            rows.append(f[0] - f[1:])
    return np.concatenate(rows) if rows else np.zeros((0, 3))


def concordance(diff: F64, weights: tuple[float, float, float]) -> float:
    """Share of pairs whose started job scores higher under ``weights`` (fair share, age,
    size); ties count half.

    Example:
        >>> pairs = np.array([[0.5, -0.1, 0.0], [0.0, 0.2, 0.0]])  # started minus passed over
        >>> concordance(pairs, (0.0, 1000.0, 0.0)), concordance(pairs, (10000.0, 1000.0, 0.0))
        (0.5, 1.0)
    """
    if not len(diff):
        return 0.5
    m = diff @ np.asarray(weights)
    return float((m > 0).mean() + 0.5 * (m == 0).mean())


def find_priority(w: Workload, cuts: tuple[int, int], total_cores: int,
                  half_life_s: int = 7 * 86400,
                  max_age_s: int = 7 * 86400) -> list[Candidate]:
    """Multifactor weight profiles the logged start order supports: the one fitted to it, and
    Slurm's defaults (:data:`DEFAULTS`), each where it explains the validation slice's order
    at least :data:`MIN_GAIN` better than FCFS (none: the order gives no evidence).

    The fitted weights are those of the grid (:data:`GRID_FAIRSHARE` x :data:`GRID_SIZE`, age
    at :data:`WEIGHT_AGE`) that explain most pairs among jobs before ``cuts[0]``; the jobs
    from ``cuts[0]`` to ``cuts[1]`` (the validation slice) measure them against FCFS. Both
    profiles are offered because explaining more pairs is not the same as replaying the
    waits better (every pair counts alike, while the mean wait is shaped by the longest
    waits): the replay in :mod:`calibrate` chooses.
    """
    val, split = cuts
    fit = order_pairs(w, 0, val, total_cores, half_life_s, max_age_s)
    held = order_pairs(w, val, split, total_cores, half_life_s, max_age_s, seed=1)
    if len(fit) < MIN_PAIRS or len(held) < MIN_PAIRS:
        return []
    grid = [(fs, WEIGHT_AGE, size) for fs in GRID_FAIRSHARE for size in GRID_SIZE]
    best = max(grid, key=lambda g: concordance(fit, g))
    fcfs = concordance(held, (0.0, WEIGHT_AGE, 0.0))
    found: list[Candidate] = []
    for weights, how in ((best, f"fitted to the logged start order of {len(fit):,} pairs of "
                                "jobs that waited together"),
                         (DEFAULTS, "Slurm's defaults")):
        ours = concordance(held, weights)
        if ours - fcfs < MIN_GAIN or any(c.values["weight_fairshare"] == weights[0]
                                         and c.values["weight_size"] == weights[2]
                                         for c in found):
            continue
        found.append(Candidate(
            {"priority": "fairshare", "weight_fairshare": weights[0],
             "weight_age": weights[1], "weight_size": weights[2], "half_life_s": half_life_s},
            f"multifactor weights (fair share {weights[0]:g}, age {weights[1]:g}, size "
            f"{weights[2]:g}; {how}): on {len(held):,} pairs of the validation slice they "
            f"explain {ours:.1%} of the orders, FCFS {fcfs:.1%}"))
    return found
