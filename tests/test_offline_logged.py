"""Logged decisions: rebuilt from the log exactly as the environment shows its decisions."""

from __future__ import annotations

import numpy as np
import pytest
from env_jobs import CLUSTER, random_workload
from offline_jobs import logged_workload

from hpcpolicy.cluster import ClusterSpec
from hpcpolicy.env.config import EnvConfig
from hpcpolicy.env.scheduling import SchedulingEnv
from hpcpolicy.env.spaces import JOB_FEATURES
from hpcpolicy.errors import ConfigError
from hpcpolicy.offline.layout import FJ, k_of, pack
from hpcpolicy.offline.logged import LoggedDecisions
from hpcpolicy.workload import Workload

FITS = [f.name for f in JOB_FEATURES].index("fits_now")


def _jobs(submit: list[int], run: list[int], procs: list[int], start: list[int]) -> Workload:
    n = len(submit)
    z = np.zeros(n, dtype=np.int64)
    return Workload(job_id=np.array([str(i) for i in range(n)], dtype=object),
                    submit=np.array(submit), run_time=np.array(run), req_walltime=np.array(run),
                    procs=np.array(procs), nodes=z, gpus=z, mem_mib=z,
                    user=z.astype(np.int32), partition=z.astype(np.int32),
                    logged_start=np.array(start))


def test_same_time_starts_are_consecutive_steps_and_hidden_starts_are_dynamics() -> None:
    # 4 cores; jobs 0 and 1 start together at 10; job 3 starts at 20 while two older wait
    w = _jobs(submit=[0, 0, 0, 5], run=[50, 50, 50, 5], procs=[2, 2, 4, 1],
              start=[10, 10, 60, 20])
    ep = LoggedDecisions(w, ClusterSpec.homogeneous(4), EnvConfig(k=1, window_size=4)).episode(0)
    assert ep is not None
    # job 0 (slot 0), job 1 (slot 0 once 0 started), job 3 from slot 1: hidden, then job 2
    assert ep.actions.tolist() == [0, 0, 0]
    assert ep.facts == {"starts": 4.0, "inside": 3.0, "outside": 1.0}
    # the second same-time step sees job 0's 2 cores taken (cluster features follow the
    # K x FJ job block; free_cores_frac comes first)
    assert ep.observations[0, FJ * 1] == pytest.approx(1.0)
    assert ep.observations[1, FJ * 1] == pytest.approx(0.5)


def test_background_jobs_of_the_log_hold_their_cores() -> None:
    # job 0 (before the window) runs 0..100 on 3 of 4 cores; window = jobs 1, 2
    w = _jobs(submit=[0, 10, 10], run=[100, 10, 10], procs=[3, 1, 1], start=[0, 10, 100])
    ep = LoggedDecisions(w, ClusterSpec.homogeneous(4), EnvConfig(k=2, window_size=2)).episode(1)
    assert ep is not None and ep.actions.tolist() == [0, 0]
    k = k_of(ep.observations.shape[1])
    assert ep.observations[0, FJ * k] == pytest.approx(0.25)   # 1 of 4 cores free at t=10
    assert ep.observations[1, FJ * k] == pytest.approx(1.0)    # job 0 ended at t=100


def test_rewards_add_up_to_minus_the_logged_mean_bounded_slowdown() -> None:
    w = logged_workload(200, seed=3, policy="sjf", backfill="easy")
    log = LoggedDecisions(w, CLUSTER, EnvConfig(k=16, window_size=200))
    ep = log.episode(0)
    assert ep is not None and ep.terminated
    wait = w.logged_start - w.submit
    bsld = np.maximum((wait + w.run_time) / np.maximum(w.run_time, 10), 1.0)
    first = int(w.logged_start.min())
    accrued = ((first - w.submit[w.submit <= first]) / np.maximum(
        w.run_time[w.submit <= first], 10)).sum() / len(w)  # before the first decision
    # rewards are stored as float32
    assert ep.ret == pytest.approx(-bsld.mean() + accrued, rel=1e-6)


def test_a_log_of_the_simulators_fcfs_gives_the_environments_observations() -> None:
    """The simulator's own FCFS schedule, read back as a log, is slot 0 at every start, and
    each logged state equals the environment's at the decision that started that job."""
    w = logged_workload(120, seed=1, policy="fcfs", backfill="none")
    env_cfg = EnvConfig(k=8, window_size=120, split="all", baselines=())
    ep = LoggedDecisions(w, CLUSTER, env_cfg).episode(0)
    assert ep is not None and set(ep.actions.tolist()) == {0}
    env = SchedulingEnv(w, CLUSTER, env_cfg)
    obs, _ = env.reset(options={"window_start": 0})
    starting: list[np.ndarray] = []
    done = False
    while not done:
        if obs["jobs"][0, FITS] == 1.0:  # the head fits: this decision starts it
            starting.append(pack(obs))
        obs, _, done, _, _ = env.step(0)
    assert len(starting) == len(ep)
    np.testing.assert_array_equal(np.stack(starting), ep.observations)


def test_windows_without_logged_starts_are_skipped_and_a_log_without_any_is_refused() -> None:
    w = logged_workload(100)
    start = w.logged_start.copy()
    start[50] = -1
    partly = _jobs(list(w.submit), list(w.run_time), list(w.procs), list(start))
    log = LoggedDecisions(partly, CLUSTER, EnvConfig(k=8, window_size=25))
    assert log.episode(25) is not None and log.episode(50) is None
    with pytest.raises(ConfigError, match="records no start times"):
        LoggedDecisions(random_workload(50), CLUSTER, EnvConfig(k=8, window_size=25))


def test_head_labels_read_the_simulators_easy_schedule_as_always_the_oldest_job() -> None:
    """FCFS with EASY backfilling, read back as a log: every start is the oldest waiting job
    or backfilled around it, so under ``head`` every action is slot 0, once per moment that
    reserves; under ``started`` the backfilled jobs' slots are actions."""
    w = logged_workload(200, seed=2, policy="fcfs", backfill="easy")
    env_cfg = EnvConfig(k=16, window_size=200)
    started = LoggedDecisions(w, CLUSTER, env_cfg).episode(0)
    head = LoggedDecisions(w, CLUSTER, env_cfg, action="head").episode(0)
    assert started is not None and head is not None
    assert started.actions.max() > 0   # backfilling happened in this log
    assert set(head.actions.tolist()) == {0}
    backfilled = head.facts["backfilled"]
    assert backfilled == int((started.actions > 0).sum()) + started.facts["outside"]
    assert 0 < head.facts["reserved"] <= backfilled
    assert len(head) == len(started) - backfilled + started.facts["outside"] + \
        head.facts["reserved"]
    assert head.ret == pytest.approx(started.ret, rel=1e-6)  # the same schedule, rewarded


def test_head_labels_keep_a_younger_start_while_the_oldest_fits() -> None:
    # 4 cores: job 0 (3 cores) waits for nothing but job 1 (1 core, younger) starts first
    w = _jobs(submit=[0, 1], run=[10, 10], procs=[3, 1], start=[20, 5])
    ep = LoggedDecisions(w, ClusterSpec.homogeneous(4), EnvConfig(k=2, window_size=2),
                         action="head").episode(0)
    assert ep is not None
    assert ep.actions.tolist() == [1, 0] and ep.facts["backfilled"] == 0
    with pytest.raises(ConfigError, match="use one of started, head"):
        LoggedDecisions(w, CLUSTER, EnvConfig(k=2, window_size=2), action="first")
