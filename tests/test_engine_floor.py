"""The engine's floor (benchmarks/engine_floor.py, issue 45 item 1) does the engine's work:
its FCFS + EASY start times equal the engine's job for job, so its time is a fair floor."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from benchmarks import engine_floor as floor
from hpcpolicy.cluster import ClusterSpec, NodeGroup
from hpcpolicy.errors import ConfigError
from hpcpolicy.sim import SimConfig, simulate
from hpcpolicy.workload import Workload


@pytest.mark.parametrize(("jobs", "procs", "seed"), [(3000, 64, 3), (3000, 128, 11)])
def test_floor_starts_equal_the_engine(tmp_path: Path, jobs: int, procs: int,
                                       seed: int) -> None:
    w, cluster = floor.lublin(tmp_path, jobs, procs, seed)
    engine = simulate(w, cluster, SimConfig(policy="fcfs", backfill="easy"))
    starts = floor.floor_starts(w, cluster)
    assert engine.stats["backfilled"] > 0  # the case exercises EASY, not FCFS alone
    assert floor.mismatch(starts, engine.start) is None


def test_floor_keeps_a_job_larger_than_the_machine_waiting() -> None:
    z = np.zeros(3, dtype=np.int64)
    w = Workload(job_id=np.array(["a", "b", "c"], dtype=object), submit=np.array([0, 1, 2]),
                 run_time=np.array([100, 50, 10]), req_walltime=np.array([100, 50, 10]),
                 procs=np.array([3, 9, 1]), nodes=z, gpus=z, mem_mib=z,
                 user=z.astype(np.int32), partition=z.astype(np.int32), logged_start=z - 1)
    cluster = ClusterSpec.homogeneous(4)
    engine = simulate(w, cluster, SimConfig(policy="fcfs", backfill="easy"))
    assert floor.floor_starts(w, cluster).tolist() == engine.start.tolist() == [0, -1, 2]


def test_floor_refuses_what_it_does_not_replay() -> None:
    z = np.zeros(1, dtype=np.int64)
    w = Workload(job_id=np.array(["a"], dtype=object), submit=z, run_time=z + 10,
                 req_walltime=z + 10, procs=z + 1, nodes=z, gpus=z, mem_mib=z,
                 user=z.astype(np.int32), partition=z.astype(np.int32), logged_start=z - 1)
    two = ClusterSpec(groups=(NodeGroup(name="a", count=2, cores=4),
                              NodeGroup(name="b", count=2, cores=8)), name="two")
    with pytest.raises(ConfigError, match="one node group"):
        floor.floor_starts(w, two)
