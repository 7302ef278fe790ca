"""Inputs and outputs of one simulation run (the contract between engine, metrics and CLI)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["BACKFILL_MODES", "SimConfig", "SimResult"]

BACKFILL_MODES = ("none", "easy", "conservative")


@dataclass(frozen=True)
class SimConfig:
    """How to replay a workload."""

    policy: str = "fcfs"
    """Name of a registered policy (see ``hpcpolicy.policies``)."""
    backfill: str = "none"
    """none, easy or conservative."""
    kill_at_limit: bool = False
    """End a job at its requested walltime when its logged run time is longer."""
    compat: str | None = None
    """Engine semantics of a peer (``rlscheduler``) instead of the project's own; see README."""
    check: bool = False
    """Check invariants while running (capacity, start >= submit, once-only starts, ...)."""
    engine: str = "fast"
    """fast (compiled) or reference (plain Python); both give identical schedules."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return asdict(self)


@dataclass
class SimResult:
    """Per-job outcome of a run, aligned with the workload's job order."""

    start: npt.NDArray[np.int64]
    """Start time (s since the workload's origin); -1 for a job that never started."""
    end: npt.NDArray[np.int64]
    """End time (s); -1 for a job that never started."""
    never_fits: npt.NDArray[np.bool_]
    """True for jobs that request more than the cluster has (reported, not shrunk)."""
    killed: npt.NDArray[np.bool_]
    """True for jobs ended at their limit (``kill_at_limit``)."""
    stats: dict[str, Any] = field(default_factory=dict)
    """Engine counters: decisions, events, backfilled jobs, wall time of the run."""
