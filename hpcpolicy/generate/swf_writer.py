"""Write generated jobs as an SWF v2.2 file: header comments, then one line per job."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import numpy.typing as npt
import polars as pl

from hpcpolicy.atomic import atomic_path

__all__ = ["write_swf"]

I64 = npt.NDArray[np.int64]


def _unknown(n: int) -> I64:
    return np.full(n, -1, dtype=np.int64)


def write_swf(
    path: Path,
    *,
    submit: I64,
    run: I64,
    size: I64,
    queue: I64,
    procs: int,
    start_unix: int,
    header: Sequence[tuple[str, str]],
) -> None:
    """Write jobs (sorted by submit time) to ``path`` atomically, as SWF v2.2.

    Fields the model does not give are -1: wait, average CPU time, used memory, requested
    time and memory, user, group, executable, partition, preceding job, think time. The
    job is rigid: requested processors = allocated = ``size``; status 1 (completed).

    Args:
        path: the file to write.
        submit: submit times, seconds from ``start_unix``.
        run: runtimes, seconds.
        size: processors.
        queue: SWF queue numbers (-1 for none).
        procs: machine size (MaxNodes and MaxProcs).
        start_unix: UnixStartTime (a UTC midnight: the model's day starts at midnight).
        header: ``(key, value)`` lines written after the standard keys, in order.
    """
    n = len(submit)
    start = datetime.fromtimestamp(start_unix, UTC)
    lines = [
        ("Version", "2.2"),
        ("Computer", f"synthetic machine of {procs} processors"),
        ("Installation", "none: a synthetic workload"),
        ("MaxJobs", str(n)),
        ("MaxRecords", str(n)),
        ("Preemption", "No"),
        ("UnixStartTime", str(start_unix)),
        ("TimeZoneString", "UTC"),
        ("StartTime", start.strftime("%a %b %d %H:%M:%S UTC %Y")),
        ("MaxNodes", str(procs)),
        ("MaxProcs", str(procs)),
        *header,
    ]
    unknown = _unknown(n)
    jobs = pl.DataFrame({
        "job": np.arange(1, n + 1, dtype=np.int64), "submit": submit, "wait": unknown,
        "run": run, "alloc": size, "cpu": unknown, "mem": unknown, "req": size,
        "req_time": unknown, "req_mem": unknown, "status": np.ones(n, dtype=np.int64),
        "user": unknown, "group": unknown, "app": unknown, "queue": queue,
        "partition": unknown, "preceding": unknown, "think": unknown,
    })
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8", newline="\n") as f:
        f.writelines(f"; {key}: {value}\n" for key, value in lines)
        f.write(";\n")
        jobs.write_csv(f, include_header=False, separator=" ", line_terminator="\n")
