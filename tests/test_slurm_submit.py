"""The trace-window scaling and plan checks of hpcpolicy.slurm.submit (no Slurm needed)."""

from __future__ import annotations

import numpy as np
import pytest

from hpcpolicy.errors import ConfigError
from hpcpolicy.slurm.submit import Control, JobSpec, Plan, ScaleConfig, scale_window
from hpcpolicy.workload import Workload


def _workload() -> Workload:
    n = np.array
    return Workload(job_id=n(["a", "b", "c"], dtype=object), submit=n([100, 160, 1100]),
                    run_time=n([50, 30_000, 900]), req_walltime=n([60, 36_000, 7_200]),
                    procs=n([1, 128, 20]), nodes=n([0, 0, 0]), gpus=n([0, 0, 0]),
                    mem_mib=n([0, 0, 0]), user=n([0, 1, 2], dtype=np.int32),
                    partition=n([0, 0, 0], dtype=np.int32), logged_start=n([-1, -1, -1]))


def test_scale_window_scales_times_sizes_and_arrivals() -> None:
    plan = scale_window(_workload(), ScaleConfig(time_factor=0.01, max_run_s=120))
    assert [j.run_s for j in plan.jobs] == [1, 120, 9]  # 0.5 -> at least 1; 300 -> at most 120
    # limits in whole minutes, at least a minute above the run
    assert [j.limit_min for j in plan.jobs] == [2, 6, 2]
    assert [j.cpus for j in plan.jobs] == [1, 32, 10]  # 64 cores for the 128 of the trace
    assert [j.nodes for j in plan.jobs] == [1, 2, 1]
    assert [j.submit_s for j in plan.jobs] == pytest.approx([0.0, 0.6, 10.0])
    assert [j.partition for j in plan.jobs] == ["batch", "short", "batch"]
    assert [j.account for j in plan.jobs] == ["physics", "biology", "physics"]
    assert all(j.limit_min * 60 > j.run_s for j in plan.jobs)


def test_arrivals_s_spreads_the_window_over_that_many_seconds() -> None:
    plan = scale_window(_workload(), ScaleConfig(arrivals_s=20))
    assert [j.submit_s for j in plan.jobs] == pytest.approx([0.0, 1.2, 20.0])
    with pytest.raises(ConfigError, match="`arrivals_s`: give arrivals_s or arrival_factor"):
        ScaleConfig(arrivals_s=20, arrival_factor=0.1)


def test_short_partition_jobs_fit_its_nodes() -> None:
    plan = scale_window(_workload(), ScaleConfig(trace_procs=64))
    b = plan.jobs[1]
    assert b.partition == "short" and b.cpus == 32 and b.nodes == 2


def test_plan_rejects_unknown_names() -> None:
    job = JobSpec("x", run_s=1, limit_min=1, cpus=1, nodes=1, partition="batch",
                  account="physics", after=("y",))
    with pytest.raises(ConfigError, match="x depends on unknown job y"):
        Plan((job,))
    ok = JobSpec("y", run_s=1, limit_min=1, cpus=1, nodes=1, partition="batch", account="a")
    with pytest.raises(ConfigError, match="cancel names unknown job z"):
        Plan((ok,), (Control(1.0, "cancel", "z"),))
    with pytest.raises(ConfigError, match=r"Control\.verb 'kill'"):
        Control(1.0, "kill", "y")


def test_scale_config_refuses_bad_values_in_one_line() -> None:
    with pytest.raises(ConfigError, match="scale config field `time_factor`: must be > 0"):
        ScaleConfig(time_factor=0)
    with pytest.raises(ConfigError, match="`max_run_s`: must be"):
        ScaleConfig.from_dict({"max_run_s": "long"})
    assert ScaleConfig.from_dict({"partitions": ["batch"]}).partitions == ("batch",)
