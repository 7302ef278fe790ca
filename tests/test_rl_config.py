"""Training configs: validation names the field, JSON round trip, --algo registry."""

from __future__ import annotations

import json

import pytest

from hpcpolicy.errors import ConfigError
from hpcpolicy.ppo.config import DDPPOConfig, PPOConfig, config_class, config_from_dict


@pytest.mark.parametrize(("field", "value", "fragment"), [
    ("total_steps", 0, "`total_steps`: must be >= 1, got 0"),
    ("gamma", 1.5, "`gamma`: must be in [0, 1]"),
    ("activation", "gelu", "activation 'gelu' is not one of tanh, relu"),
    ("hidden", (), "`hidden`: must be one or more positive integers"),
    ("target_kl", 0.0, "`target_kl`: must be > 0 or null"),
    ("num_minibatches", 2000, "`num_minibatches`: 2000 minibatches need a rollout"),
    ("seed", -1, "`seed`: must be >= 0"),
])
def test_invalid_fields_are_named(field: str, value: object, fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        PPOConfig(**{field: value})  # type: ignore[arg-type]
    assert fragment in str(info.value)


def test_ddppo_fields_are_checked() -> None:
    with pytest.raises(ConfigError, match="`sync_frac`"):
        DDPPOConfig(sync_frac=0.0)
    with pytest.raises(ConfigError, match="nccl needs device cuda"):
        DDPPOConfig(backend="nccl")


def test_round_trip_through_json() -> None:
    for cfg in (PPOConfig(hidden=(8, 4), episode_metric_names=("bsld",), target_kl=None),
                DDPPOConfig(sync_frac=0.6, num_envs=2)):
        again = config_from_dict(json.loads(json.dumps(cfg.to_dict())))
        assert again == cfg and type(again) is type(cfg)


def test_unknown_algo_lists_valid_ones() -> None:
    with pytest.raises(ConfigError, match=r"unknown algo 'sac'; valid: ddppo, ppo"):
        config_class("sac")


def test_unknown_field_is_reported() -> None:
    with pytest.raises(ConfigError, match=r"unknown field\(s\) lr"):
        config_from_dict({"algo": "ppo", "lr": 0.1})
