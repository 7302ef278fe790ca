"""A synchronous vector of environments whose state can be checkpointed and restored.

:class:`SyncEnvs` steps ``N`` Gymnasium environments that follow the observation contract of
:mod:`hpcpolicy.env.spaces` and stacks their observations. An environment whose episode ends is
reset in the same step (the returned observation is the new episode's first), and the last
observation of a truncated episode is kept for value bootstrapping.

Restoring without pickling environments: every reset gets an explicit seed drawn from the
vector's own ``numpy.random.Generator``, and the vector records the actions taken since each
environment's last reset. :meth:`SyncEnvs.state_dict` is therefore small plain data (generator
state, episode seeds, action lists), and :meth:`SyncEnvs.load_state_dict` rebuilds the exact
environment states by resetting with the recorded seeds and replaying the actions. This needs
environments that are deterministic given ``reset(seed=...)`` and the actions (the contract).

Example:
    >>> from benchmarks.builders.rl_toy_env import ToyQueueEnv
    >>> envs = SyncEnvs(lambda: ToyQueueEnv(k=4), num_envs=2, seed=0)
    >>> obs = envs.reset()
    >>> obs["jobs"].shape, obs["mask"].dtype
    ((2, 4, 7), dtype('bool'))
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from hpcpolicy.env.prior import OLDEST
from hpcpolicy.env.spaces import OBS_KEYS
from hpcpolicy.errors import SimulationError

if TYPE_CHECKING:
    import gymnasium as gym

__all__ = ["EpisodeStats", "StepResult", "SyncEnvs"]

Obs = dict[str, npt.NDArray[Any]]


@dataclass(frozen=True)
class EpisodeStats:
    """Summary of one finished episode."""

    reward: float
    """Undiscounted sum of rewards."""
    length: int
    """Number of decisions."""
    metrics: dict[str, float] = field(default_factory=dict)
    """``info["episode_metrics"]`` of the final step, if the environment provides it."""


@dataclass
class StepResult:
    """What one :meth:`SyncEnvs.step` returns."""

    obs: Obs
    """Stacked next observations (the first of a new episode where one ended)."""
    rewards: npt.NDArray[np.float32]
    """Reward of each environment's step, ``[N]``."""
    terminated: npt.NDArray[np.bool_]
    """Episode reached its natural end, ``[N]``."""
    truncated: npt.NDArray[np.bool_]
    """Episode was cut (time limit) and should be bootstrapped, ``[N]``."""
    final_obs: dict[int, Obs]
    """Last observation of each truncated episode, by environment index."""
    episodes: list[EpisodeStats]
    """Episodes that ended in this step."""


class SyncEnvs:
    """``num_envs`` environments stepped in turn, with same-step autoreset and replayable state.

    Args:
        make_env: Builds one environment (called ``num_envs`` times).
        num_envs: Number of environments.
        seed: Seeds the generator that draws every episode's reset seed.
    """

    def __init__(self, make_env: Callable[[], gym.Env[Any, Any]], num_envs: int,
                 seed: int) -> None:
        self.envs = [make_env() for _ in range(num_envs)]
        self._rng = np.random.default_rng(seed)
        self._seeds = [0] * num_envs
        self._actions: list[list[int]] = [[] for _ in range(num_envs)]
        self._returns = [0.0] * num_envs
        spaces = getattr(self.envs[0].observation_space, "spaces", {})
        missing = [key for key in OBS_KEYS if key not in spaces]
        if missing:
            raise ValueError(f"environment observation space lacks {missing}; see "
                             "hpcpolicy.env.spaces for the contract")
        self.k, self.job_dim = spaces["jobs"].shape
        self.cluster_dim = spaces["cluster"].shape[0]
        self.slot_order: str = getattr(self.envs[0].unwrapped, "slot_order", OLDEST)
        """What fills the slots (:attr:`hpcpolicy.env.scheduling.SchedulingEnv.slot_order`)."""

    @property
    def num_envs(self) -> int:
        """Number of environments."""
        return len(self.envs)

    def reset(self) -> Obs:
        """Reset every environment with a fresh seed; the stacked first observations."""
        return self._stack([self._reset_one(i) for i in range(self.num_envs)])

    def step(self, actions: npt.ArrayLike) -> StepResult:
        """Apply one action per environment; reset the ones whose episode ended."""
        actions = np.asarray(actions)
        n = self.num_envs
        rewards = np.zeros(n, np.float32)
        terminated, truncated = np.zeros(n, np.bool_), np.zeros(n, np.bool_)
        observations: list[Obs] = []
        final_obs: dict[int, Obs] = {}
        episodes: list[EpisodeStats] = []
        for i, env in enumerate(self.envs):
            obs, reward, term, trunc, info = env.step(int(actions[i]))
            self._actions[i].append(int(actions[i]))
            self._returns[i] += float(reward)
            rewards[i], terminated[i], truncated[i] = reward, term, trunc
            if term or trunc:
                episodes.append(EpisodeStats(
                    self._returns[i], len(self._actions[i]),
                    {k: float(v) for k, v in info.get("episode_metrics", {}).items()}))
                if trunc and not term:
                    final_obs[i] = {key: np.asarray(obs[key])[None] for key in OBS_KEYS}
                obs = self._reset_one(i)
            observations.append(obs)
        return StepResult(self._stack(observations), rewards, terminated, truncated, final_obs,
                          episodes)

    def state_dict(self) -> dict[str, Any]:
        """Plain data from which :meth:`load_state_dict` rebuilds the current states."""
        return {"rng": self._rng.bit_generator.state, "seeds": list(self._seeds),
                "actions": [list(a) for a in self._actions]}

    def load_state_dict(self, state: dict[str, Any]) -> Obs:
        """Restore the states recorded by :meth:`state_dict`; the stacked current observations.

        Raises:
            SimulationError: The state is for another number of environments, or replaying
                the recorded actions ended an episode early (a non-deterministic environment).
        """
        if len(state["seeds"]) != self.num_envs:
            raise SimulationError(f"checkpoint holds {len(state['seeds'])} environments per "
                                  f"worker, this run has {self.num_envs}; resume with the same "
                                  "num_envs")
        observations = []
        for i, env in enumerate(self.envs):
            self._seeds[i] = int(state["seeds"][i])
            obs, _ = env.reset(seed=self._seeds[i])
            self._actions[i], self._returns[i] = [], 0.0
            for action in state["actions"][i]:
                obs, reward, term, trunc, _ = env.step(int(action))
                self._actions[i].append(int(action))
                self._returns[i] += float(reward)
                if term or trunc:
                    raise SimulationError(
                        f"environment {i}: replaying {len(state['actions'][i])} recorded actions "
                        f"from reset(seed={self._seeds[i]}) ended the episode after "
                        f"{len(self._actions[i])}; the environment must be deterministic given "
                        "its reset seed and actions")
            observations.append(obs)
        self._rng.bit_generator.state = state["rng"]
        return self._stack(observations)

    def close(self) -> None:
        """Close every environment."""
        for env in self.envs:
            env.close()  # type: ignore[no-untyped-call]

    def _reset_one(self, i: int) -> Obs:
        """Reset environment ``i`` with the next seed from the vector's generator."""
        self._seeds[i] = int(self._rng.integers(2**63 - 1))
        self._actions[i], self._returns[i] = [], 0.0
        obs, _ = self.envs[i].reset(seed=self._seeds[i])
        return obs  # type: ignore[no-any-return]

    def _stack(self, observations: list[Obs]) -> Obs:
        """Stack per-environment observations; mask as bool; check that each has a valid slot."""
        stacked = {
            "jobs": np.stack([o["jobs"] for o in observations]).astype(np.float32, copy=False),
            "cluster": np.stack([o["cluster"] for o in observations]).astype(np.float32,
                                                                              copy=False),
            "mask": np.stack([o["mask"] for o in observations]).astype(np.bool_, copy=False),
        }
        empty = np.flatnonzero(~stacked["mask"].any(axis=1))
        if empty.size:
            raise SimulationError(f"environment(s) {empty.tolist()} asked for a decision with no "
                                  "valid slot (mask all 0); an environment must end the episode "
                                  "or offer at least one job")
        return stacked
