"""Heuristic and random rollouts: the environment's steps, reproducible draws."""

from __future__ import annotations

import numpy as np
import pytest
from env_jobs import CLUSTER, random_workload

from hpcpolicy.env.config import EnvConfig
from hpcpolicy.env.scheduling import SchedulingEnv
from hpcpolicy.errors import ConfigError
from hpcpolicy.offline.layout import pack
from hpcpolicy.offline.rollouts import Rollouts, parse_source

ENV = EnvConfig(k=8, window_size=60, backfill="easy", split="all", baselines=())


@pytest.mark.parametrize("source", ["sjf", "f1+eps", "random"])
def test_rollout_steps_are_the_environments_steps(source: str) -> None:
    w = random_workload(200, seed=2)
    ep = Rollouts(w, CLUSTER, ENV, seed=5).episode(40, source)
    assert ep is not None and ep.terminated and len(ep) >= 60
    env = SchedulingEnv(w, CLUSTER, ENV)
    obs, _ = env.reset(options={"window_start": 40})
    for t, action in enumerate(ep.actions):
        np.testing.assert_array_equal(pack(obs), ep.observations[t])
        obs, reward, done, _, _ = env.step(int(action))
        assert reward == pytest.approx(float(ep.rewards[t]), rel=1e-6, abs=1e-9)
        assert done == (t == len(ep) - 1)


def test_sjf_rollouts_pick_the_shortest_visible_request() -> None:
    w = random_workload(200, seed=2)
    ep = Rollouts(w, CLUSTER, ENV, seed=0).episode(0, "sjf")
    assert ep is not None
    walltime = ep.observations[:, 1:8 * 7:7]  # req_walltime_s column of every slot
    mask = ep.observations[:, -8:] > 0.5
    best = np.where(mask, walltime, np.inf).min(axis=1)
    np.testing.assert_array_equal(walltime[np.arange(len(ep)), ep.actions], best)


def test_random_draws_depend_on_seed_window_and_source_only() -> None:
    w = random_workload(200, seed=2)
    a = Rollouts(w, CLUSTER, ENV, seed=1)
    b = Rollouts(w, CLUSTER, ENV, seed=1)
    b.episode(0, "random")  # another episode first: no shared stream
    first, again = a.episode(60, "random"), b.episode(60, "random")
    assert first is not None and again is not None
    np.testing.assert_array_equal(first.actions, again.actions)
    other = Rollouts(w, CLUSTER, ENV, seed=2).episode(60, "random")
    assert other is not None and other.actions.tolist() != first.actions.tolist()


def test_unknown_sources_list_the_valid_ones() -> None:
    assert parse_source("sjf+eps") == ("sjf", True) and parse_source("random") == (None, False)
    with pytest.raises(ConfigError, match="use random, or one of fcfs, lcfs"):
        parse_source("fairshare")
    with pytest.raises(ConfigError, match="epsilon must be in"):
        Rollouts(random_workload(10), CLUSTER, ENV, seed=0, epsilon=2.0)
