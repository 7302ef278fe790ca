"""The GPU-type assignment environment: masks, the ADLRO reward's arithmetic on a hand-made
case, faithfulness to ``simulate``, the Gymnasium contract and determinism."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from sim_cases import workload

from benchmarks.builders.gpu_jobs import GPU_PARTITION, write_gpu_table
from hpcpolicy.cluster import ClusterSpec, NodeGroup
from hpcpolicy.cluster_io import load_cluster
from hpcpolicy.errors import ConfigError
from hpcpolicy.hetero.config import GpuDqnConfig
from hpcpolicy.hetero.env import GpuAssignEnv
from hpcpolicy.hetero.observe import feature_names, mask_index
from hpcpolicy.hetero.policy import rule_policy
from hpcpolicy.sim import SimConfig, simulate
from hpcpolicy.workload import Workload


def two_types() -> ClusterSpec:
    """One node of 4 GPUs of type a (speed 1), one of type b (speed 2)."""
    return ClusterSpec((NodeGroup("a", 1, 16, gpus=4, gpu_type="a", gpu_speed=1.0),
                        NodeGroup("b", 1, 16, gpus=4, gpu_type="b", gpu_speed=2.0)))


def hand_made() -> Workload:
    """Four jobs (the window) and two late fillers (the test part).

    With type a for job 0 at t=0: job 1 (4 GPUs) fits only b and ends at 50; job 2 (4 GPUs,
    t=20) waits for b while a's 2 free GPUs idle over [20, 50), then runs on b to 150; job 3
    (t=160) finds both types free: the second decision.
    """
    return workload([(0, 100, 100, 1, 0, 2), (0, 100, 100, 1, 0, 4), (20, 200, 200, 1, 0, 4),
                     (160, 100, 100, 1, 0, 2), (10_000, 10, 10, 1, 0, 1),
                     (10_001, 10, 10, 1, 0, 1)])


def test_masks_and_the_adlro_reward_on_a_hand_made_case() -> None:
    cfg = GpuDqnConfig(window_size=4, train_frac=0.7, idle_weight=0.5, reward_scale_s=10.0)
    env = GpuAssignEnv(hand_made(), two_types(), cfg)
    assert env.types == (("a", 1.0), ("b", 2.0))
    obs, info = env.reset(seed=0)
    assert info["mask"].tolist() == [True, True]
    assert obs[mask_index(2)].tolist() == [1.0, 1.0]
    names = feature_names(("a", "b"))
    assert obs[names.index("b/runtime_factor")] == -1.0  # twice as fast: log2(0.5)
    assert obs[names.index("waiting_jobs")] > 0           # job 1 waits behind job 0
    # Type a for job 0: jobs 0, 1, 2 complete in 100 + 50 + 130 s; 2 GPUs idle for 30 s
    # while job 2 waits.
    obs, reward, terminated, _, info = env.step(0)
    assert not terminated and info["mask"].tolist() == [True, True]
    assert reward == pytest.approx(-(280 + 0.5 * 60) / 10)
    # Type b for job 3: 50 s, nothing waits any more.
    obs, reward, terminated, _, info = env.step(1)
    assert terminated and reward == pytest.approx(-5.0)
    assert not obs.any() and not info["mask"].any()
    assert info["episode_jct_s"] == pytest.approx(330 / 4)
    assert info["episode_idle_gpu_h"] == pytest.approx(60 / 3600)
    assert (info["episode_decisions"], info["episode_jobs"]) == (2, 4)
    env.close()


def test_an_invalid_action_is_taken_as_the_first_valid_type() -> None:
    cfg = GpuDqnConfig(window_size=4, reward_scale_s=10.0, idle_weight=0.5)
    env = GpuAssignEnv(hand_made(), two_types(), cfg)
    env.reset(seed=0)
    _, reward, _, _, info = env.step(7)
    assert info["invalid_action"] and reward == pytest.approx(-31.0)  # as type a
    env.close()


def test_the_environment_is_the_engine_with_a_placer() -> None:
    # Always the fastest type in the environment = simulate() with the fastest-type placer.
    w = hand_made().take(np.arange(4))
    spec = two_types()
    env = GpuAssignEnv(hand_made(), spec, GpuDqnConfig(window_size=4))
    env.reset(seed=0)
    done = False
    while not done:
        _, _, done, _, _ = env.step(1)
    assert env._run is not None and env._run.outcome is not None
    outcome = env._run.outcome
    result = simulate(w, spec, SimConfig(check=True), policy=rule_policy("fastest"))
    assert outcome["start"].tolist() == result.start.tolist()
    assert (outcome["start"] + outcome["dur"]).tolist() == result.end.tolist()
    env.close()


@pytest.fixture(scope="module")
def gpu_env_data(tmp_path_factory: pytest.TempPathFactory) -> tuple[Workload, ClusterSpec]:
    table = write_gpu_table(tmp_path_factory.mktemp("hetero") / "gpu.parquet", n=300)
    return Workload.from_table(table), load_cluster(GPU_PARTITION)


def _rollout(env: GpuAssignEnv, seed: int, steps: int) -> list[Any]:
    obs, info = env.reset(seed=seed)
    trace: list[Any] = [obs.tolist()]
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        action = int(rng.choice(np.flatnonzero(info["mask"])))
        obs, reward, terminated, _, info = env.step(action)
        trace += [action, reward, obs.tolist()]
        if terminated:
            obs, info = env.reset()
            trace.append(obs.tolist())
    env.close()
    return trace


def test_same_seed_same_episodes_and_check_env(
        gpu_env_data: tuple[Workload, ClusterSpec]) -> None:
    w, spec = gpu_env_data
    cfg = GpuDqnConfig(window_size=64)
    a = _rollout(GpuAssignEnv(w, spec, cfg), 3, 150)
    assert a == _rollout(GpuAssignEnv(w, spec, cfg), 3, 150)
    assert a != _rollout(GpuAssignEnv(w, spec, cfg), 4, 150)
    env = GpuAssignEnv(w, spec, cfg)
    check_env(env, skip_render_check=True)
    env.close()


def test_one_gpu_type_is_refused() -> None:
    one = ClusterSpec((NodeGroup("a", 2, 16, gpus=4, gpu_type="a"), NodeGroup("cpu", 2, 8)))
    with pytest.raises(ConfigError, match=r"1 GPU type\(s\) \['a'\]; assigning jobs to GPU "
                                          "types needs at least 2"):
        GpuAssignEnv(hand_made(), one, GpuDqnConfig(window_size=4))
