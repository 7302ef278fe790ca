"""simulate()'s contract: options, bad input, allocation, stepping, import cost."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from sim_cases import workload

from hpcpolicy.cluster import ClusterSpec, NodeGroup
from hpcpolicy.errors import ConfigError
from hpcpolicy.sim import RunningJobs, SimConfig, Stepper, simulate
from hpcpolicy.sim.allocation import FirstFit, get_allocator

CLUSTER = ClusterSpec.homogeneous(4)
W = workload([(0, 10, 10, 2), (5, 10, 10, 2)])


@pytest.mark.parametrize("kwargs, words", [
    ({"backfill": "eazy"}, ["backfill 'eazy'", "none, easy, conservative"]),
    ({"engine": "turbo"}, ["engine 'turbo'", "fast, reference"]),
    ({"compat": "slurm"}, ["compat 'slurm'", "rlscheduler, hpcopt"]),
    ({"compat": "rlscheduler", "backfill": "conservative"}, ["no conservative"]),
    ({"allocator": "worst-fit"}, ["allocator 'worst-fit'", "first-fit, first-available"]),
])
def test_bad_options_are_named(kwargs: dict[str, str], words: list[str]) -> None:
    with pytest.raises(ConfigError) as err:
        SimConfig(**kwargs)  # type: ignore[arg-type]
    assert all(w in str(err.value) for w in words)


def test_unknown_policy_lists_the_valid_ones() -> None:
    with pytest.raises(ConfigError, match="policy 'fifo' does not exist; valid policies: fcfs"):
        simulate(W, CLUSTER, SimConfig(policy="fifo"))


def test_empty_workload() -> None:
    with pytest.raises(ConfigError, match="the workload has no jobs"):
        simulate(W.take(np.arange(0)), CLUSTER)


def test_unsorted_workload_names_the_job() -> None:
    w = workload([(5, 10, 10, 2), (0, 10, 10, 2)])
    with pytest.raises(ConfigError, match="not sorted by submit time \\(job b"):
        simulate(w, CLUSTER)


def test_negative_values_name_the_jobs() -> None:
    w = workload([(0, -1, 10, 2), (1, 5, 10, 2)])
    with pytest.raises(ConfigError, match="run_time is negative for job\\(s\\) a;"):
        simulate(w, CLUSTER)


def test_running_jobs_that_do_not_fit() -> None:
    four = np.array([3, 3])
    z = np.zeros(2, dtype=np.int64)
    running = RunningJobs(procs=four, nodes=z, gpus=z, end=np.array([9, 9]),
                          req_end=np.array([9, 9]))
    with pytest.raises(ConfigError, match="running job 1 \\(3 procs, 0 GPUs\\) does not fit"):
        simulate(W, CLUSTER, running=running)


def test_running_jobs_arrays_must_agree() -> None:
    with pytest.raises(ConfigError, match=r"RunningJobs\.end has 2 entries, procs has 1"):
        RunningJobs(procs=np.array([1]), nodes=np.array([0]), gpus=np.array([0]),
                    end=np.array([1, 2]), req_end=np.array([1]))


def test_result_fields_and_stats() -> None:
    r = simulate(W, CLUSTER, SimConfig(backfill="easy"))
    assert r.start.tolist() == [0, 5] and r.end.tolist() == [10, 15]
    assert r.alloc_cores.tolist() == [2, 2] and r.group.tolist() == [0, 0]
    assert {"events", "passes", "decisions", "started", "backfilled", "engine", "jobs",
            "never_fits", "never_fits_ids", "wall_s"} <= set(r.stats)
    assert (r.stats["started"], r.stats["jobs"], r.stats["engine"]) == (2, 2, "fast")


def test_exclusive_nodes_take_whole_nodes() -> None:
    # Two nodes of 4 cores. Exclusive: a 1-core job holds a whole node, so three 1-core
    # jobs run two at a time; shared, all three fit at once.
    cluster = ClusterSpec((NodeGroup("cpu", 2, 4),))
    w = workload([(0, 10, 10, 1)] * 3)
    shared = simulate(w, cluster)
    exclusive = simulate(w, cluster, SimConfig(exclusive_nodes=True))
    assert shared.start.tolist() == [0, 0, 0] and shared.alloc_cores.tolist() == [1, 1, 1]
    assert exclusive.start.tolist() == [0, 0, 10]
    assert exclusive.alloc_cores.tolist() == [4, 4, 4]


def test_first_fit_demands() -> None:
    cluster = ClusterSpec((NodeGroup("cpu", 4, 8, mem_mib=1000),
                           NodeGroup("gpu", 2, 16, mem_mib=2000, gpus=4)))
    procs, nodes = np.array([10, 2, 40, 8]), np.array([0, 0, 0, 4])
    gpus, mem = np.array([0, 3, 0, 0]), np.array([0, 2500, 0, 0])
    shared = FirstFit().demands(procs, nodes, gpus, mem, cluster)
    # (cores, gpus, MiB, nodes) per group; -1 rows where a job cannot run.
    assert shared.need[0].tolist() == [[10, 0, 0, 0], [10, 0, 0, 0]]
    assert shared.need[1].tolist() == [[-1] * 4, [2, 3, 2500, 0]]          # GPUs: gpu only
    assert shared.need[2, 0].tolist() == [-1] * 4 and shared.never_fits[2]  # 40 > 32 and 32
    assert shared.need[3].tolist() == [[8, 0, 0, 0], [-1] * 4]  # 4 nodes: the gpu group has 2
    excl = FirstFit().demands(procs, nodes, gpus, mem, cluster, exclusive=True)
    # 10 cores: 2 nodes of 8, or 1 node of 16 (with its 4 GPUs and 2000 MiB).
    assert excl.need[0].tolist() == [[16, 0, 2000, 2], [16, 4, 2000, 1]]
    # 3 GPUs and 2500 MiB: 1 GPU node by GPUs, 2 by memory.
    assert excl.need[1, 1].tolist() == [32, 8, 4000, 2]
    assert excl.capacity.tolist() == [[32, 0, 4000, 4], [32, 8, 4000, 2]]


def test_a_gpu_job_never_fits_a_cpu_cluster() -> None:
    w = workload([(0, 10, 10, 1, 0, 1), (0, 10, 10, 1)])
    r = simulate(w, CLUSTER)
    assert r.never_fits.tolist() == [True, False] and r.start.tolist() == [-1, 0]


def test_gpu_jobs_go_to_the_gpu_group() -> None:
    cluster = ClusterSpec((NodeGroup("cpu", 1, 4), NodeGroup("gpu", 1, 4, gpus=2)))
    w = workload([(0, 10, 10, 2, 0, 2), (0, 10, 10, 4), (1, 10, 10, 2)])
    r = simulate(w, cluster, SimConfig(backfill="easy"))
    # The GPU job takes the GPU node; the 4-core job the CPU node; the third job (no GPU)
    # finds the CPU node full and the GPU node's other 2 cores free: first fit puts it there.
    assert r.group.tolist() == [1, 0, 1] and r.start.tolist() == [0, 0, 1]
    assert r.alloc_gpus.tolist() == [2, 0, 0]


def test_unknown_allocator_lists_the_valid_ones() -> None:
    with pytest.raises(ConfigError, match="allocator 'x' is not one of first-fit"):
        get_allocator("x")


def test_stepper_rejects_a_wrong_number_of_scores_and_nan() -> None:
    st = Stepper(W, CLUSTER, SimConfig())
    view = st.next_decision()
    assert view is not None and view.jobs.tolist() == [0] and view.fits_now.tolist() == [True]
    with pytest.raises(ConfigError, match="returned 2 scores for 1 waiting jobs"):
        st.decide([0.0, 1.0])
    with pytest.raises(ConfigError, match="NaN"):
        st.decide([float("nan")])
    st.decide([-np.inf])  # infinities are valid scores
    while (v := st.next_decision()) is not None:
        st.decide(np.zeros(len(v.jobs)))
    assert st.result().start.tolist() == [0, 5]


def test_importing_the_contracts_does_not_load_numba() -> None:
    code = ("import sys, hpcpolicy.sim, hpcpolicy.sim.types, hpcpolicy.policies; "
            "print('numba' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"
