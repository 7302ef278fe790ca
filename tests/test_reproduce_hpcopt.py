"""HPCOpt's published strict-FCFS figures (ErenAri/HPC-workload-optimizer), replayed.

Their conventions are the ``hpcopt`` preset of :class:`WorkloadOptions`: processors =
requested (SWF field 8), else allocated (field 5); a record is dropped only when its submit,
wait, run time or processors is missing; a missing requested time is planned with the run
time. Their machines: CTC-SP2 at 512 processors (not its header's 338), HPC2N at 240. The
whole traces are replayed; the means must match to 0.5 %.
"""

from __future__ import annotations

import pytest
from conftest import shared_file

from hpcpolicy.cluster_io import resolve_cluster
from hpcpolicy.ingest import ingest
from hpcpolicy.sim import SimConfig
from hpcpolicy.sim.windows import replay
from hpcpolicy.workload import Workload, WorkloadOptions

CASES = {
    # file: (processors, jobs, mean wait s, p95 wait s)
    "CTC-SP2-1996-3.1-cln.swf.gz": (512, 77_222, 6182.60, 34360.85),
    "HPC2N-2002-2.2-cln.swf.gz": (240, 202_870, 16189.23, 68219.00),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_strict_fcfs_whole_trace(name: str, tmp_path: object) -> None:
    procs, jobs, mean_wait, p95_wait = CASES[name]
    table = tmp_path / "jobs.parquet"  # type: ignore[operator]
    ingest([shared_file(name)], table)
    w = Workload.from_table(table, options=WorkloadOptions.preset("hpcopt"))
    [run] = replay(w, resolve_cluster(procs=procs), [SimConfig(policy="fcfs", compat="hpcopt")])
    assert run.summary["jobs"] == jobs
    assert run.summary["mean_wait_s"] == pytest.approx(mean_wait, rel=5e-3)
    assert run.summary["p95_wait_s"] == pytest.approx(p95_wait, rel=5e-3)
