"""The genuine-log scenario: a scaled window of a real trace plus one job per Slurm feature the
sacct reader must get right, run on the test cluster, then exported with sacct.

Features (job name -> what it exercises):
``arr`` an array of 4 tasks throttled to 2 at a time (``0-3%2``); ``het`` a heterogeneous job
of two components; ``dep`` depends on ``het`` (afterok); ``timeout`` sleeps past its 1-minute
limit; ``fail`` exits 3; ``never`` depends on ``fail`` and is cancelled while pending;
``requeue`` is requeued while running and runs again; ``held`` is submitted held and released;
the trace jobs use both partitions and both accounts.
"""

from __future__ import annotations

from pathlib import Path

from hpcpolicy.slurm.submit import Control, JobSpec, Plan, ScaleConfig, scale_window

__all__ = ["FEATURES", "TRACE_JOBS", "feature_jobs", "scenario_plan"]

TRACE_JOBS = 16
"""Jobs taken from the trace window."""


def feature_jobs() -> Plan:
    """One job per feature (see the module docstring), with their controls."""
    jobs = (
        JobSpec("arr", run_s=2, limit_min=1, cpus=2, nodes=1, partition="batch",
                account="physics", array="0-3%2"),
        JobSpec("het", run_s=2, limit_min=2, cpus=2, nodes=1, partition="batch",
                account="physics", het=((4, 1),)),
        JobSpec("dep", run_s=1, limit_min=1, cpus=1, nodes=1, partition="batch",
                account="biology", after=("het",)),
        JobSpec("timeout", run_s=300, limit_min=1, cpus=1, nodes=1, partition="batch",
                account="biology"),
        JobSpec("fail", run_s=1, limit_min=1, cpus=3, nodes=1, partition="short",
                account="biology", exit_code=3),
        JobSpec("never", run_s=1, limit_min=1, cpus=1, nodes=1, partition="batch",
                account="physics", after=("fail",)),
        JobSpec("requeue", run_s=4, limit_min=1, cpus=1, nodes=1, partition="short",
                account="biology", submit_s=0.5),
        JobSpec("held", run_s=1, limit_min=1, cpus=5, nodes=1, partition="batch",
                account="physics", hold=True),
    )
    controls = (Control(2.5, "requeue", "requeue"), Control(4.0, "release", "held"),
                Control(6.0, "cancel", "never"))
    return Plan(jobs, controls)


FEATURES = tuple(j.name for j in feature_jobs().jobs)


def scenario_plan(swf: Path, work: Path, first: int = 200) -> Plan:
    """The trace window (``TRACE_JOBS`` jobs of ``swf`` from job ``first``, runs of 1-5 s,
    arrivals compressed to at most 10 s) followed by the feature jobs."""
    from hpcpolicy.ingest import IngestConfig, ingest
    from hpcpolicy.workload import Workload

    table = work / "trace.parquet"
    ingest([swf], table, IngestConfig(overwrite=True))
    whole = Workload.from_table(table)
    window = whole.take(range(first, first + TRACE_JOBS))
    trace = scale_window(window, ScaleConfig(time_factor=0.01, arrivals_s=10,
                                             trace_procs=int(whole.procs.max())))
    extra = feature_jobs()
    return Plan(trace.jobs + extra.jobs, extra.controls)
