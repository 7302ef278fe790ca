"""One :class:`~hpcpolicy.sim.types.SimResult` from any engine's raw per-job arrays.

Every engine (compiled, stepped, reference, node-level GPU) ends in the same arrays; this is
where they become the result ``simulate`` returns, so that the engines (and
:meth:`hpcpolicy.sim.compiled.Stepper.result`) share it without importing one another.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hpcpolicy.sim.prepare import Prepared
from hpcpolicy.sim.types import SimResult
from hpcpolicy.workload import Workload

__all__ = ["NEVER_FITS_SHOWN", "assemble"]

NEVER_FITS_SHOWN = 20
"""How many ids of never-fitting jobs ``SimResult.stats['never_fits_ids']`` lists."""


def assemble(prep: Prepared, workload: Workload, outcome: dict[str, Any],
             engine: str) -> SimResult:
    """A :class:`SimResult` from an engine's raw per-job arrays."""
    start = np.asarray(outcome["start"], dtype=np.int64)
    started = start >= 0
    group = np.where(started, outcome["group"], -1).astype(np.int64)
    jobs, in_group = np.arange(prep.n), np.maximum(group, 0)
    never = prep.never_fits
    stats = dict(outcome["stats"])
    stats.update({
        "engine": engine,
        "jobs": prep.n,
        "never_fits": int(never.sum()),
        "never_fits_ids": [str(workload.job_id[i])
                           for i in np.flatnonzero(never)[:NEVER_FITS_SHOWN]],
    })
    # The node-level GPU engine decides run times and GPU counts as jobs start.
    dur = outcome.get("dur", prep.dur)
    gpus = outcome.get("alloc_gpus")
    if gpus is None:
        gpus = prep.need[jobs, in_group, 1]
    return SimResult(
        start=start,
        end=np.where(started, start + dur, -1).astype(np.int64),
        never_fits=never.copy(),
        killed=outcome.get("killed", prep.killed) & started,
        stats=stats,
        backfilled=np.asarray(outcome["backfilled"], dtype=bool) & started,
        alloc_cores=np.where(started, prep.need[jobs, in_group, 0], 0),
        alloc_gpus=np.where(started, gpus, 0).astype(np.int64),
        group=group,
        placement=outcome.get("placement", {}),
    )
