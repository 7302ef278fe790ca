"""The reference engine's event queue: a heap of ``(time, priority, seq, kind, job)``.

Named priorities fix the order of events at equal times: a job *finish* frees resources before
a *capacity* change (an outage's start or end, :mod:`hpcpolicy.sim.capacity`) and before a
job *submit* joins the queue, and all come before the *scheduling pass*. Among events of the
same time and kind, ``seq`` decides: the job index for finishes and submits, the change's
index for capacity changes, so the order is reproducible without any wall clock or random
number.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from enum import IntEnum

__all__ = ["Event", "EventQueue", "Kind"]


class Kind(IntEnum):
    """Event kinds; the value is the priority at equal times (lower first)."""

    FINISH = 0
    CAPACITY = 1
    SUBMIT = 2
    PASS = 3


@dataclass(order=True, frozen=True)
class Event:
    """One event; ordered by (time, kind, seq)."""

    time: int
    kind: Kind
    seq: int
    job: int = field(compare=False, default=-1)


class EventQueue:
    """A min-heap of events.

    Example:
        >>> q = EventQueue()
        >>> q.schedule(Event(5, Kind.SUBMIT, 0, 0)); q.schedule(Event(5, Kind.FINISH, 3, 3))
        >>> [e.kind.name for e in (q.pop(), q.pop())]
        ['FINISH', 'SUBMIT']
    """

    def __init__(self) -> None:
        self._heap: list[Event] = []

    def __len__(self) -> int:
        return len(self._heap)

    def schedule(self, event: Event) -> None:
        """Add an event."""
        heapq.heappush(self._heap, event)

    def pop(self) -> Event:
        """Remove and return the next event."""
        return heapq.heappop(self._heap)
