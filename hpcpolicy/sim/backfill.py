"""Backfilling as pure functions: given the queue, the running jobs and the free resources at
one moment, which waiting jobs start now.

Both functions are called when the best-scored waiting job (the *head*, ``queue[0]``) does
not fit. Planning sees requested walltimes only: a running job is expected to end at its
requested end, or one second from now if it has already run past it; a waiting job is expected
to run for its requested walltime (at least 1 s). Node groups are tried in the cluster spec's
order (first fit).

* :func:`easy_backfill` (Mu'alem & Feitelson, 2001): the head gets one reservation, at the
  *shadow time* when enough running jobs will have ended, in the first group where it fits
  then. The other jobs, in score order, start now if they fit now and either end by the shadow
  time or fit in the *extra* resources (those the head will not need at the shadow time) —
  or run in another group than the head's.
* :func:`conservative_backfill`: every waiting job, in score order, gets a reservation at the
  earliest time its request fits on the availability :class:`Profile` without moving any
  earlier reservation; those whose reservation is now start now. Reservations are recomputed
  from scratch at every scheduling pass, so jobs that end early pull later ones forward.

The compiled engine re-implements both on arrays; a test keeps the two identical.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

__all__ = [
    "NO_RESERVATION",
    "EasyPlan",
    "Profile",
    "RunningSlot",
    "conservative_backfill",
    "easy_backfill",
    "fits",
    "planned_end",
    "shadow_time",
]

I64 = npt.NDArray[np.int64]

NO_RESERVATION = 2**62
"""The shadow time of a head that cannot be reserved (the compiled engine's ``BIG``)."""


@dataclass(frozen=True)
class RunningSlot:
    """A running job as planning sees it."""

    req_end: int
    """When its requested walltime runs out (s)."""
    group: int
    """Node group it runs in."""
    need: I64
    """(4,) cores, GPUs, MiB, nodes it holds."""


@dataclass(frozen=True)
class EasyPlan:
    """What :func:`easy_backfill` decided."""

    starts: list[tuple[int, int]]
    """(job, group) to start now, in order."""
    shadow: int
    """The head's reservation: when it is planned to start."""
    group: int
    """The node group of the head's reservation."""
    extra: I64 = field(repr=False, default_factory=lambda: np.zeros(4, dtype=np.int64))
    """(4,) extra resources of that group left after the backfilled jobs."""


def planned_end(slot: RunningSlot, now: int) -> int:
    """When planning expects ``slot`` to end: its requested end, or ``now + 1`` if that passed."""
    return max(slot.req_end, now + 1)


def fits(need: I64, free: I64) -> bool:
    """Whether a (4,) demand fits in (4,) free resources (a -1 demand never fits)."""
    return bool(need[0] >= 0 and (need <= free).all())


def shadow_time(now: int, head_need: I64, free: I64,
                running: Sequence[RunningSlot]) -> tuple[int, int, I64]:
    """Earliest planned time and group where the head fits, and the extra resources left then.

    Args:
        now: current time.
        head_need: (groups, 4) demand of the head (-1 rows for groups it cannot use).
        free: (groups, 4) free resources now.
        running: the running jobs.

    Returns:
        (shadow time, group, (4,) extra resources of that group at the shadow time), or
        (:data:`NO_RESERVATION`, -1, zeros) when the head does not fit even once every
        running job has ended (an outage holds the resources it needs).

    Example:
        >>> import numpy as np
        >>> slots = [RunningSlot(50, 0, np.array([2, 0, 0, 0])),
        ...          RunningSlot(80, 0, np.array([4, 0, 0, 0]))]
        >>> t, g, extra = shadow_time(0, np.array([[5, 0, 0, 0]]), np.array([[1, 0, 0, 0]]), slots)
        >>> t, g, extra.tolist()
        (80, 0, [2, 0, 0, 0])
    """
    avail = free.copy()
    ends = sorted((planned_end(s, now), i) for i, s in enumerate(running))
    k = 0
    while True:
        t = ends[k][0] if k < len(ends) else now
        while k < len(ends) and ends[k][0] == t:
            slot = running[ends[k][1]]
            avail[slot.group] += slot.need
            k += 1
        for g in range(head_need.shape[0]):
            if fits(head_need[g], avail[g]):
                return t, g, avail[g] - head_need[g]
        if k >= len(ends):  # out of capacity (an outage) even with every running job ended
            return NO_RESERVATION, -1, np.zeros(4, dtype=np.int64)


def easy_backfill(now: int, queue: Sequence[int], need: I64, length: I64, free: I64,
                  running: Sequence[RunningSlot]) -> EasyPlan:
    """EASY backfilling around a blocked head ``queue[0]``.

    Args:
        now: current time.
        queue: waiting jobs in score order; ``queue[0]`` does not fit now.
        need: (jobs, groups, 4) demand table.
        length: (jobs,) planning length of each job (requested walltime, at least 1 s).
        free: (groups, 4) free resources now (not modified).
        running: the running jobs.

    Returns:
        The jobs to start now and the head's reservation.

    Example:
        >>> import numpy as np
        >>> need = np.array([[[3, 0, 0, 0]], [[3, 0, 0, 0]], [[1, 0, 0, 0]]])
        >>> slot = RunningSlot(100, 0, np.array([3, 0, 0, 0]))
        >>> plan = easy_backfill(0, [0, 1, 2], need, np.array([10, 500, 500]),
        ...                      np.array([[1, 0, 0, 0]]), [slot])
        >>> plan.starts, plan.shadow   # job 2 runs past the shadow but fits in the extra core
        ([(2, 0)], 100)
    """
    shadow, g_head, extra = shadow_time(now, need[queue[0]], free, running)
    free = free.copy()
    starts: list[tuple[int, int]] = []
    for j in queue[1:]:
        ends_in_time = now + int(length[j]) <= shadow
        for g in range(free.shape[0]):
            d = need[j, g]
            if not fits(d, free[g]):
                continue
            if g != g_head or ends_in_time:
                break
            if fits(d, extra):
                extra = extra - d
                break
        else:
            continue
        free[g] -= d
        starts.append((int(j), g))
    return EasyPlan(starts, shadow, g_head, extra)


class Profile:
    """Free resources over time, as a step function.

    ``times[i]`` are the breakpoints (``times[0] = now``); ``free[i]`` (groups x 4) holds on
    ``[times[i], times[i + 1])`` and the last one forever after.

    Example:
        >>> import numpy as np
        >>> p = Profile(0, np.array([[2, 0, 0, 0]]), [RunningSlot(30, 0, np.array([2, 0, 0, 0]))])
        >>> p.earliest(np.array([[4, 0, 0, 0]]), 10)
        (30, 0)
        >>> p.reserve(30, 10, 0, np.array([4, 0, 0, 0])); p.times.tolist()
        [0, 30, 40]
    """

    def __init__(self, now: int, free: I64, running: Sequence[RunningSlot]) -> None:
        ends = {planned_end(s, now) for s in running}
        self.times: I64 = np.array([now, *sorted(ends)], dtype=np.int64)
        self.free: I64 = np.repeat(free[None], len(self.times), axis=0)
        for slot in running:
            k = int(np.searchsorted(self.times, planned_end(slot, now)))
            self.free[k:, slot.group] += slot.need

    def earliest(self, need: I64, length: int) -> tuple[int, int] | None:
        """Earliest (time, group) where a (groups, 4) demand fits for ``length`` seconds;
        the earliest time wins, then the first group. None where it fits nowhere on the
        profile (an outage holds what it needs)."""
        best: tuple[int, int] | None = None
        for g in range(need.shape[0]):
            if need[g, 0] < 0:
                continue
            t = self._earliest_in(g, need[g], length)
            if t is not None and (best is None or t < best[0]):
                best = (t, g)
        return best

    def _earliest_in(self, g: int, d: I64, length: int) -> int | None:
        # Breakpoint i works if d fits on every step from times[i] until times[i] + length,
        # i.e. on steps i .. last[i] - 1 (last[i] = first breakpoint at or after the end).
        ok = np.asarray((self.free[:, g, :] >= d).all(axis=1))
        last = np.searchsorted(self.times, self.times + length)
        misses = np.concatenate([[0], np.cumsum(~ok)])  # misses before each step
        works = ok & (misses[last] == misses[: len(ok)])
        if not works.any():
            return None
        return int(self.times[int(np.argmax(works))])

    def reserve(self, start: int, length: int, g: int, d: I64) -> None:
        """Take ``d`` from group ``g`` on ``[start, start + length)``; ``start`` must be a
        breakpoint (as :meth:`earliest` returns)."""
        end = start + length
        k = int(np.searchsorted(self.times, end))
        if k == len(self.times) or self.times[k] != end:
            self.times = np.insert(self.times, k, end)
            self.free = np.insert(self.free, k, self.free[k - 1], axis=0)
        self.free[int(np.searchsorted(self.times, start)):k, g] -= d


def conservative_backfill(now: int, queue: Sequence[int], need: I64, length: I64, free: I64,
                          running: Sequence[RunningSlot]) -> tuple[list[tuple[int, int]],
                                                                   dict[int, tuple[int, int]]]:
    """Conservative backfilling: a reservation for every waiting job, in score order.

    Args: as :func:`easy_backfill`.

    Returns:
        (jobs to start now as (job, group), reservations as job -> (time, group)). Placing
        stops once no job left in the queue could start now (each needs more cores than are
        free now in every group): their reservations could not change what starts now, so
        only the jobs before that point have one.

    Example:
        >>> import numpy as np
        >>> need = np.array([[[4, 0, 0, 0]], [[1, 0, 0, 0]], [[1, 0, 0, 0]]])
        >>> slot = RunningSlot(100, 0, np.array([2, 0, 0, 0]))
        >>> starts, res = conservative_backfill(0, [0, 1, 2], need, np.array([10, 50, 500]),
        ...                                     np.array([[2, 0, 0, 0]]), [slot])
        >>> starts, res[2]    # job 2 would overlap the head's reservation: it waits
        ([(1, 0)], (110, 0))
    """
    profile = Profile(now, free, running)
    starts: list[tuple[int, int]] = []
    reservations: dict[int, tuple[int, int]] = {}
    cores = need[np.asarray(queue, dtype=np.int64), :, 0].astype(float)
    cores[cores < 0] = np.inf
    cheapest = np.minimum.accumulate(cores[::-1], axis=0)[::-1]  # per group, from i on
    for i, j in enumerate(queue):
        if (profile.free[0, :, 0] < cheapest[i]).all():
            break
        found = profile.earliest(need[j], int(length[j]))
        if found is None:
            continue
        t, g = found
        profile.reserve(t, int(length[j]), g, need[j, g])
        reservations[int(j)] = (t, g)
        if t == now:
            starts.append((int(j), g))
    return starts, reservations
