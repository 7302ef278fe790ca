"""Rewards: each term's episode total is the window's metric; specs and mixes."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

pytest.importorskip("gymnasium")

from env_jobs import CLUSTER, random_workload

from hpcpolicy.env import EnvConfig
from hpcpolicy.env.rewards import REWARD_TERMS, format_reward, parse_reward
from hpcpolicy.env.scheduling import SchedulingEnv
from hpcpolicy.errors import ConfigError

WORKLOAD = random_workload(200, seed=7)
BASE = EnvConfig(k=8, window_size=60, split="all", baselines=())
METRIC = {"bsld": ("bsld", -1.0), "wait": ("wait_s", -1 / 3600), "response":
          ("response_s", -1 / 3600), "utilization": ("utilization", 1.0)}


def _episode(cfg: EnvConfig, seed: int) -> tuple[list[float], dict[str, float]]:
    env = SchedulingEnv(WORKLOAD, CLUSTER, cfg)
    _, info = env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    rewards, done = [], False
    while not done:
        valid = np.flatnonzero(info["action_mask"])
        _, reward, done, _, info = env.step(int(rng.choice(valid)))
        rewards.append(reward)
    return rewards, info["episode_metrics"]


@pytest.mark.parametrize("term", list(REWARD_TERMS))
@pytest.mark.parametrize("backfill", ["none", "easy"])
def test_an_episode_adds_up_to_the_window_metric(term: str, backfill: str) -> None:
    rewards, metrics = _episode(replace(BASE, reward=term, backfill=backfill), seed=3)
    key, scale = METRIC[term]
    assert sum(rewards) == pytest.approx(scale * metrics[key], rel=1e-9)
    assert len(rewards) == metrics["decisions"] and sum(r != 0 for r in rewards) > 1  # dense


def test_a_mix_is_the_weighted_sum_and_the_same_choices_give_the_same_metrics() -> None:
    mixed, metrics = _episode(replace(BASE, reward="bsld:2,utilization:50,wait:0"), seed=9)
    plain, same = _episode(BASE, seed=9)
    assert metrics == same
    assert sum(mixed) == pytest.approx(-2 * metrics["bsld"] + 50 * metrics["utilization"],
                                       rel=1e-9)
    assert sum(plain) == pytest.approx(-metrics["bsld"], rel=1e-9)


def test_reward_specs() -> None:
    assert parse_reward("bsld") == {"bsld": 1.0}
    assert parse_reward(" Wait:0.5 , response ") == {"wait": 0.5, "response": 1.0}
    assert format_reward(parse_reward("bsld:1")) == "bsld"
    assert format_reward({"bsld": 1.0, "utilization": 50.0}) == "bsld:1,utilization:50"
    for spec, message in (("slowdown", "unknown term 'slowdown'; valid terms: bsld, wait, "
                                       "response, utilization"),
                          ("bsld:x", "weight 'x' of 'bsld' is not a number"),
                          ("bsld:inf", "weight of 'bsld' must be finite"),
                          ("bsld,bsld:2", "term 'bsld' is given twice"),
                          ("wait:0", "every weight is 0")):
        with pytest.raises(ConfigError, match=message):
            parse_reward(spec)
