"""The scheduling environment: Gymnasium contract, determinism, masking, observations, episodes."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pytest

gym = pytest.importorskip("gymnasium")

from env_jobs import CLUSTER, random_workload  # noqa: E402
from gymnasium.utils.env_checker import check_env  # noqa: E402

from hpcpolicy.env import ENV_ID, EnvConfig  # noqa: E402
from hpcpolicy.env.driver import head_scores  # noqa: E402
from hpcpolicy.env.scheduling import INVALID_ACTION_REWARD, SchedulingEnv  # noqa: E402
from hpcpolicy.env.spaces import encode_observation  # noqa: E402
from hpcpolicy.errors import ConfigError, SimulationError  # noqa: E402
from hpcpolicy.sim.compiled import Stepper  # noqa: E402
from hpcpolicy.sim.engine import simulate  # noqa: E402
from hpcpolicy.sim.metrics import outcome_table, summarize  # noqa: E402
from hpcpolicy.sim.windows import WindowConfig, running_at  # noqa: E402

WORKLOAD = random_workload(300, seed=1)
SMALL = EnvConfig(k=8, window_size=40, split="all", baselines=("fcfs", "sjf"))


def _env(**changes: Any) -> SchedulingEnv:
    return SchedulingEnv(WORKLOAD, CLUSTER, replace(SMALL, **changes))


def _rollout(env: Any, seed: int, policy: str = "random") -> list[tuple[Any, ...]]:
    """(obs, reward, terminated, info) per step of one episode; masked random or slot 0."""
    obs, info = env.reset(seed=seed)
    env.action_space.seed(seed)
    trace: list[tuple[Any, ...]] = [(obs, 0.0, False, info)]
    done = False
    while not done:
        mask = info["action_mask"]
        action = env.action_space.sample(mask=mask) if policy == "random" else 0
        obs, reward, done, truncated, info = env.step(action)
        assert not truncated
        trace.append((obs, reward, done, info))
    return trace


def test_registered_and_passes_the_gymnasium_checker() -> None:
    env = gym.make(ENV_ID, workload=WORKLOAD, cluster=CLUSTER, config=SMALL)
    check_env(env.unwrapped)
    assert env.unwrapped.observation_space["jobs"].shape == (8, 7)
    assert env.unwrapped.action_space.n == 8


@pytest.mark.parametrize("backfill", ["none", "easy"])
def test_same_seed_same_episode_in_two_envs(backfill: str) -> None:
    a, b = _rollout(_env(backfill=backfill), seed=5), _rollout(_env(backfill=backfill), seed=5)
    assert len(a) == len(b) > 10
    for (oa, ra, da, _), (ob, rb, db, _) in zip(a, b, strict=True):
        assert ra == rb and da == db
        for key in ("jobs", "cluster", "mask"):
            assert np.array_equal(oa[key], ob[key])
    assert a[-1][3]["episode_metrics"] == b[-1][3]["episode_metrics"]
    other = _rollout(_env(backfill=backfill), seed=6)
    assert [r for _, r, _, _ in other] != [r for _, r, _, _ in a]


def test_masked_actions_are_always_valid_and_an_empty_slot_changes_nothing() -> None:
    trace = _rollout(_env(), seed=2)
    for obs, _, _, info in trace[:-1]:
        assert np.array_equal(obs["mask"], info["action_mask"]) and obs["mask"].any()
    assert trace[-1][2] and not trace[-1][0]["mask"].any()
    assert trace[-1][3]["episode_metrics"]["invalid_actions"] == 0.0

    env = _env()
    obs, info = env.reset(seed=3)
    empty = int(np.flatnonzero(obs["mask"] == 0)[0]) if not obs["mask"].all() else None
    if empty is None:  # every slot is full: there is no empty slot to try
        pytest.skip("first decision has a full window")
    after, reward, done, _, info = env.step(empty)
    assert reward == INVALID_ACTION_REWARD and not done and info["invalid_action"]
    assert all(np.array_equal(after[key], obs[key]) for key in obs)


def _raw_features(view: Any, window: Any, running: Any, now: int) -> tuple[dict[str, Any], ...]:
    """The raw features of one decision, straight from the feature descriptions."""
    jobs = view.jobs
    cores = float(CLUSTER.total_cores)
    remaining = np.maximum(running[1] - now, 0)
    job = {"wait_s": now - window.submit[jobs], "req_walltime_s": window.req_walltime[jobs],
           "req_cores_frac": window.procs[jobs] / cores,
           "req_nodes_frac": np.zeros(len(jobs)), "req_gpus_frac": np.zeros(len(jobs)),
           "req_mem_frac": np.zeros(len(jobs)), "fits_now": view.fits_now.astype(float)}
    cluster = {"free_cores_frac": view.free[:, 0].sum() / cores, "free_gpus_frac": 0.0,
               "free_mem_frac": 0.0, "queue_length": len(jobs),
               "run_remaining_mean_s": remaining.mean() if remaining.size else 0.0,
               "run_remaining_max_s": remaining.max() if remaining.size else 0.0,
               "cores_released_1h_frac": running[0][remaining <= 3600].sum() / cores}
    return job, cluster


@pytest.mark.parametrize(("backfill", "warm"), [("none", False), ("easy", False),
                                                ("easy", True)])
def test_observations_are_the_declared_features_of_the_engine_state(backfill: str,
                                                                    warm: bool) -> None:
    """Step a public Stepper in lockstep with the env (same choices) and rebuild every
    observation from its QueueViews, with the running jobs found from the final schedule.
    Slots show the oldest k waiting jobs (QueueView.jobs is in submit order)."""
    cfg = replace(SMALL, backfill=backfill, warm=warm, k=6)
    env = SchedulingEnv(WORKLOAD, CLUSTER, cfg)
    obs, info = env.reset(seed=11)
    env.action_space.seed(11)
    start = info["window_start"]
    window = WORKLOAD.take(np.arange(start, start + cfg.window_size))
    pre = running_at(WORKLOAD, start, CLUSTER, WindowConfig(size=cfg.window_size, warm=True),
                     simulate, cfg.sim_config())[0] if warm else None
    assert not warm or len(pre) > 0
    stepper = Stepper(window, CLUSTER, cfg.sim_config(), running=pre)
    seen = []
    done = False
    while not done:
        view = stepper.next_decision()
        assert view is not None
        seen.append((view, obs))
        action = int(env.action_space.sample(mask=info["action_mask"]))
        stepper.decide(head_scores(len(view.jobs), action))
        obs, _, done, _, info = env.step(action)
    assert stepper.next_decision() is None
    # more jobs waited than the k slots show: the encoding keeps the first k in submit order
    assert max(len(view.jobs) for view, _ in seen) > cfg.k
    result = stepper.result()
    table = outcome_table(window, result, identity=False)
    assert info["episode_metrics"]["bsld"] == summarize(table, CLUSTER)["mean_bsld"]
    req_end = result.start + np.maximum(window.req_walltime, 1)
    for view, observed in seen:
        now = view.now
        queued = np.zeros(len(window), bool)
        queued[view.jobs] = True
        started = (result.start < now) | ((result.start == now) & ~queued)
        on = started & (result.start >= 0) & (result.end > now)
        cores, ends = window.procs[on], req_end[on]
        if pre is not None:
            still = pre.end > now
            cores = np.concatenate([cores, pre.procs[still]])
            ends = np.concatenate([ends, pre.req_end[still]])
        job, cluster = _raw_features(view, window, (cores, ends), now)
        expected = encode_observation(job, cluster, k=cfg.k)
        for key in ("jobs", "cluster", "mask"):
            np.testing.assert_allclose(observed[key], expected[key], rtol=0, atol=1e-6,
                                       err_msg=f"{key} at t={now}")


@pytest.mark.parametrize(("backfill", "warm", "compat"), [
    ("none", False, None), ("easy", True, None), ("conservative", False, None),
    ("easy", False, "rlscheduler"), ("none", True, "rlscheduler")])
def test_always_the_oldest_job_is_fcfs(backfill: str, warm: bool, compat: str | None) -> None:
    """Slot 0 (the oldest waiting job) as head, the rest in submit order: FCFS exactly."""
    env = _env(backfill=backfill, warm=warm, compat=compat, exclusive_nodes=bool(compat),
               baselines=("fcfs",))
    metrics = _rollout(env, seed=4, policy="first")[-1][3]["episode_metrics"]
    assert metrics["bsld_vs_best"] == 1.0
    assert metrics["bsld"] == metrics["best_heuristic_bsld"] > 1.0
    assert metrics["decisions"] > 1 and metrics["invalid_actions"] == 0


def test_windows_come_from_the_configured_part_only() -> None:
    env = _env(split="train", train_frac=0.5, window_size=50)
    starts = {env.reset(seed=s)[1]["window_start"] for s in range(40)}
    assert len(starts) > 10 and max(starts) <= 150 - 50 and min(starts) >= 0
    env = _env(split="test", train_frac=0.5, window_size=50)
    starts = {env.reset(seed=s)[1]["window_start"] for s in range(40)}
    assert min(starts) >= 150 and max(starts) <= 250
    with pytest.raises(ConfigError, match=r"window_start 10 is outside the test part "
                                          r"\(windows start at 150\.\.250\)"):
        env.reset(options={"window_start": 10})
    with pytest.raises(ConfigError, match=r"the train part holds 150 jobs .* fewer than one "
                                          r"window of 200"):
        _env(split="train", train_frac=0.5, window_size=200)


def test_misuse_is_reported() -> None:
    with pytest.raises(SimulationError, match=r"step\(\) with no episode in progress"):
        _env().step(0)
    with pytest.raises(ConfigError, match=r"`baselines`: .*'fifo'"):
        replace(SMALL, baselines=("fifo",))
    with pytest.raises(ConfigError, match="reward 'slowdown': unknown term"):
        replace(SMALL, reward="slowdown")
    with pytest.raises(ConfigError, match="unknown field"):
        EnvConfig.from_dict({"window": 3})
