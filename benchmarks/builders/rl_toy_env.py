"""A tiny scheduling-like environment that follows the observation contract, for RL tests.

Each step shows a fresh random queue of 1..K valid jobs; the reward is 1 when the policy picks
the job with the shortest requested walltime (the one SJF would pick) and 0 otherwise, so a
random policy scores about the mean of 1/n and a learned one approaches 1. An empty slot is
accepted (Gymnasium envs take any action of their space), rewarded -1 and counted in the
episode metric ``invalid_actions``. Episodes end
(``terminated``) after ``episode_len`` decisions with an empty final queue, as the real
environment ends when a window is fully scheduled. All randomness comes from ``np_random``.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np

from hpcpolicy.env.spaces import CLUSTER_FEATURES, JOB_FEATURES, action_space, observation_space

__all__ = ["ToyQueueEnv", "make_rank_toy_env", "make_toy_env"]

WALLTIME = [f.name for f in JOB_FEATURES].index("req_walltime_s")
_interrupted: list[int] = []


class ToyQueueEnv(gym.Env[dict[str, np.ndarray], int]):
    """Pick the shortest job out of a random queue.

    Args:
        k: Number of slots.
        episode_len: Decisions per episode.
        on_step: Called with the count of steps this instance has taken, after each step;
            tests use it to interrupt or crash a training run at a chosen point.
    """

    metadata: dict[str, Any] = {"render_modes": []}  # noqa: RUF012 (Gymnasium's convention)

    def __init__(self, k: int = 8, episode_len: int = 16,
                 on_step: Callable[[int], None] | None = None) -> None:
        self.observation_space = observation_space(k)
        self.action_space = action_space(k)  # type: ignore[assignment]
        self.k, self.episode_len, self.on_step = k, episode_len, on_step
        self.steps_taken = 0
        self._t = 0
        self._optimal = 0
        self._invalid = 0
        self._obs: dict[str, np.ndarray] = {}

    def _new_queue(self) -> dict[str, np.ndarray]:
        n_valid = int(self.np_random.integers(1, self.k + 1))
        jobs = np.zeros((self.k, len(JOB_FEATURES)), np.float32)
        jobs[:n_valid] = self.np_random.random((n_valid, len(JOB_FEATURES)), np.float32)
        mask = np.zeros(self.k, np.int8)
        mask[:n_valid] = 1
        cluster = self.np_random.random(len(CLUSTER_FEATURES), np.float32)
        return {"jobs": jobs, "cluster": cluster, "mask": mask}

    def _empty_queue(self) -> dict[str, np.ndarray]:
        return {"jobs": np.zeros((self.k, len(JOB_FEATURES)), np.float32),
                "cluster": np.zeros(len(CLUSTER_FEATURES), np.float32),
                "mask": np.zeros(self.k, np.int8)}

    def reset(self, *, seed: int | None = None,
              options: dict[str, Any] | None = None) -> tuple[dict[str, np.ndarray],
                                                              dict[str, Any]]:
        super().reset(seed=seed)
        self._t, self._optimal, self._invalid = 0, 0, 0
        self._obs = self._new_queue()
        return self._obs, {"action_mask": self._obs["mask"].copy()}

    def step(self, action: int) -> tuple[dict[str, np.ndarray], float, bool, bool,
                                         dict[str, Any]]:
        mask = self._obs["mask"].astype(bool)
        if mask[action]:
            walltimes = np.where(mask, self._obs["jobs"][:, WALLTIME], np.inf)
            reward = float(walltimes[action] == walltimes.min())
            self._optimal += int(reward)
        else:  # an empty slot: a wasted decision (the trainer must never send one)
            reward = -1.0
            self._invalid += 1
        self._t += 1
        self.steps_taken += 1
        terminated = self._t >= self.episode_len
        self._obs = self._empty_queue() if terminated else self._new_queue()
        info: dict[str, Any] = {"action_mask": self._obs["mask"].copy()}
        if terminated:
            info["episode_metrics"] = {"optimal_frac": self._optimal / self._t,
                                       "invalid_actions": float(self._invalid)}
        if self.on_step is not None:
            self.on_step(self.steps_taken)
        return self._obs, reward, terminated, False, info


def make_toy_env(k: int = 8, episode_len: int = 16,
                 max_episode_steps: int | None = None) -> gym.Env[Any, Any]:
    """A :class:`ToyQueueEnv`, wrapped in ``TimeLimit`` (truncation) if ``max_episode_steps``."""
    env: gym.Env[Any, Any] = ToyQueueEnv(k=k, episode_len=episode_len)
    if max_episode_steps is not None:
        env = gym.wrappers.TimeLimit(env, max_episode_steps=max_episode_steps)
    return env


def make_rank_toy_env(k: int = 8, episode_len: int = 16, slow_rank: int | None = None,
                      delay_s: float = 0.0, crash_rank: int | None = None, crash_at: int = 0,
                      interrupt_rank: int | None = None,
                      interrupt_at: int = 0) -> gym.Env[Any, Any]:
    """A toy env for DD-PPO tests that behaves by the torchrun ``RANK`` it runs in.

    On ``slow_rank`` every step sleeps ``delay_s`` (a straggler); on ``crash_rank`` the
    ``crash_at``-th step of this environment raises (a worker failure); on ``interrupt_rank``
    the ``interrupt_at``-th step sends SIGINT to its own process (Ctrl-C reaching one worker).
    """
    rank = int(os.environ.get("RANK", "0"))

    def on_step(n: int) -> None:
        if rank == slow_rank:
            time.sleep(delay_s)
        if rank == crash_rank and n == crash_at:
            raise RuntimeError(f"simulated crash of rank {rank}")
        if rank == interrupt_rank and n == interrupt_at and not _interrupted:
            _interrupted.append(n)  # once per process, as one Ctrl-C, not once per env
            os.kill(os.getpid(), signal.SIGINT)

    return ToyQueueEnv(k=k, episode_len=episode_len, on_step=on_step)
