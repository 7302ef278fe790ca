"""SyncEnvs: stacking, same-step autoreset, truncation, and exact restore by action replay."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

pytest.importorskip("gymnasium")

from benchmarks.builders.rl_toy_env import ToyQueueEnv, make_toy_env
from hpcpolicy.errors import SimulationError
from hpcpolicy.ppo.vector import Obs, SyncEnvs


def _valid_actions(obs: Obs, rng: np.random.Generator) -> npt.NDArray[np.int64]:
    return np.array([rng.choice(np.flatnonzero(m)) for m in obs["mask"]])


def _equal_obs(a: Obs, b: Obs) -> bool:
    return all(np.array_equal(a[k], b[k]) for k in ("jobs", "cluster", "mask"))


def test_stacked_shapes_and_autoreset() -> None:
    envs = SyncEnvs(lambda: ToyQueueEnv(k=5, episode_len=3), num_envs=3, seed=1)
    obs = envs.reset()
    assert obs["jobs"].shape == (3, 5, 7) and obs["cluster"].shape == (3, 7)
    assert obs["mask"].dtype == np.bool_
    rng = np.random.default_rng(0)
    for t in range(3):
        result = envs.step(_valid_actions(obs, rng))
        obs = result.obs
        assert result.terminated.all() == (t == 2)
    # episodes ended in the last step and were reset at once: the new observation is playable
    assert obs["mask"].any(axis=1).all()
    assert [e.length for e in result.episodes] == [3, 3, 3]
    assert all("optimal_frac" in e.metrics for e in result.episodes)


def test_truncation_keeps_the_final_observation() -> None:
    envs = SyncEnvs(lambda: make_toy_env(k=4, episode_len=10, max_episode_steps=2), 2, seed=2)
    obs = envs.reset()
    rng = np.random.default_rng(1)
    first = envs.step(_valid_actions(obs, rng))
    assert not first.truncated.any() and not first.final_obs
    second = envs.step(_valid_actions(first.obs, rng))
    assert second.truncated.all() and not second.terminated.any()
    assert sorted(second.final_obs) == [0, 1]
    assert second.final_obs[0]["jobs"].shape == (1, 4, 7)


def test_restore_continues_identically() -> None:
    make = lambda: ToyQueueEnv(k=6, episode_len=7)  # noqa: E731
    envs = SyncEnvs(make, num_envs=3, seed=11)
    obs = envs.reset()
    rng = np.random.default_rng(5)
    for _ in range(10):  # mid-episode for every env, after at least one autoreset
        obs = envs.step(_valid_actions(obs, rng)).obs
    state = envs.state_dict()
    future_rng = np.random.default_rng(9)
    original = []
    for _ in range(12):
        result = envs.step(_valid_actions(obs, future_rng))
        original.append(result)
        obs = result.obs

    restored = SyncEnvs(make, num_envs=3, seed=999)  # the seed is overwritten by the state
    obs = restored.load_state_dict(state)
    future_rng = np.random.default_rng(9)
    for expected in original:
        result = restored.step(_valid_actions(obs, future_rng))
        assert _equal_obs(result.obs, expected.obs)
        np.testing.assert_array_equal(result.rewards, expected.rewards)
        np.testing.assert_array_equal(result.terminated, expected.terminated)
        assert [e.reward for e in result.episodes] == [e.reward for e in expected.episodes]
        obs = result.obs


def test_restore_refuses_inconsistent_state() -> None:
    make = lambda: ToyQueueEnv(k=4, episode_len=5)  # noqa: E731
    envs = SyncEnvs(make, num_envs=2, seed=0)
    envs.reset()
    state = envs.state_dict()
    with pytest.raises(SimulationError, match="checkpoint holds 2 environments per worker, "
                                              "this run has 3"):
        SyncEnvs(make, num_envs=3, seed=0).load_state_dict(state)
    state["actions"][1] = [0] * 6  # more decisions than an episode has
    with pytest.raises(SimulationError, match="must be deterministic given its reset seed"):
        SyncEnvs(make, num_envs=2, seed=0).load_state_dict(state)


class _NoChoiceEnv(ToyQueueEnv):
    def reset(self, *, seed: int | None = None,
              options: dict[str, Any] | None = None) -> tuple[Obs, dict[str, Any]]:
        obs, info = super().reset(seed=seed)
        obs["mask"][:] = 0
        return obs, info


def test_decision_without_valid_slot_is_an_error() -> None:
    with pytest.raises(SimulationError, match=r"environment\(s\) \[0, 1\] asked for a decision "
                                              "with no valid slot"):
        SyncEnvs(lambda: _NoChoiceEnv(k=3), num_envs=2, seed=0).reset()


def test_environment_without_the_contract_is_refused() -> None:
    import gymnasium as gym

    with pytest.raises(ValueError, match=r"lacks \['jobs', 'cluster', 'mask'\]"):
        SyncEnvs(lambda: gym.make("CartPole-v1"), num_envs=1, seed=0)
