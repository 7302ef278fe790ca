"""A workload ready for simulation: numpy columns sorted by submit time.

Built from the canonical job table (``jobs.parquet``) under named conventions (which processor
count to use, what to do when the requested walltime is missing, which jobs to drop), so that
anyone can replay a peer's published figures by naming the same conventions.

Only :attr:`Workload.run_time` is ground truth; every other column is what the scheduler knew
at submit time. Integer arrays use no sentinels: options resolve missing values when the
workload is built, and the choices are recorded in :attr:`Workload.notes`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

__all__ = ["Workload"]

I64 = npt.NDArray[np.int64]
I32 = npt.NDArray[np.int32]


@dataclass(frozen=True)
class Workload:
    """Jobs as parallel numpy arrays, sorted by (submit, original order).

    All times are whole seconds relative to :attr:`origin` (epoch seconds of t = 0).
    """

    job_id: npt.NDArray[np.object_]
    """Source job ids (str), for output tables."""
    submit: I64
    """Submit time (s since origin), non-decreasing."""
    run_time: I64
    """Actual run time from the log (s); ground truth, never shown to policies."""
    req_walltime: I64
    """Requested walltime used for planning (s), after the documented fallback."""
    procs: I64
    """Processors (cores) the job occupies."""
    nodes: I64
    """Nodes requested (0 = any placement of ``procs`` cores)."""
    gpus: I64
    """GPUs the job occupies (0 for CPU jobs)."""
    mem_mib: I64
    """Memory requested, whole job (MiB; 0 = not constrained)."""
    user: I32
    """User code, an index into :attr:`users`."""
    partition: I32
    """Partition code, an index into :attr:`partitions`."""
    logged_start: I64
    """Start time recorded in the log (s since origin), or -1 where the log has none; used
    only to measure how well a replay reproduces the log."""
    users: tuple[str, ...] = ()
    partitions: tuple[str, ...] = ()
    origin: int = 0
    """Epoch seconds of t = 0."""
    notes: tuple[str, ...] = field(default=())
    """How missing values were resolved and which jobs were dropped, in words."""

    def __len__(self) -> int:
        return int(self.submit.shape[0])

    def take(self, index: npt.ArrayLike) -> Workload:
        """A new workload of the jobs at ``index`` (e.g. a window of consecutive jobs)."""
        idx = np.asarray(index)
        cols = {name: getattr(self, name)[idx] for name in _ARRAY_FIELDS}
        return Workload(**cols, users=self.users, partitions=self.partitions,
                        origin=self.origin, notes=self.notes)


_ARRAY_FIELDS = ("job_id", "submit", "run_time", "req_walltime", "procs", "nodes", "gpus",
                 "mem_mib", "user", "partition", "logged_start")
