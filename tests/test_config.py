"""The config base: every config checks field types (from the annotations) before ranges."""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any

import pytest

from hpcpolicy.cluster import GpuModel, NodeGroup
from hpcpolicy.config import MAX_INT, Config
from hpcpolicy.env.config import EnvConfig
from hpcpolicy.errors import ConfigError
from hpcpolicy.evaluate import EvaluateConfig
from hpcpolicy.hetero.config import GpuDqnConfig
from hpcpolicy.ingest.config import IngestConfig
from hpcpolicy.marl.config import MarlConfig, MarlEnvConfig
from hpcpolicy.offline.config import DatasetConfig, OfflineConfig
from hpcpolicy.policies.settings import FairshareConfig
from hpcpolicy.ppo.config import DDPPOConfig, PPOConfig, config_from_dict
from hpcpolicy.sim.types import SimConfig
from hpcpolicy.sim.windows import WindowConfig
from hpcpolicy.tune.config import TuneConfig
from hpcpolicy.whatif.runner import WhatifConfig
from hpcpolicy.workload import WorkloadOptions

CONFIGS: list[type[Config]] = [
    PPOConfig, DDPPOConfig, MarlConfig, MarlEnvConfig, EnvConfig, DatasetConfig, OfflineConfig,
    GpuDqnConfig, TuneConfig, IngestConfig, SimConfig, FairshareConfig, WorkloadOptions,
    GpuModel, EvaluateConfig, WindowConfig, WhatifConfig,
]


def _error(cls: type[Config], data: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as info:
        cls.from_dict(data)
    message = str(info.value)
    assert "\n" not in message
    return message


@pytest.mark.parametrize(("data", "expected"), [
    ({"learning_rate": "fast"}, "ppo config field `learning_rate`: must be a number, got 'fast'"),
    ({"gamma": [1]}, "ppo config field `gamma`: must be a number, got [1]"),
    ({"num_steps": 99999999999999999999}, "ppo config field `num_steps`: must be an integer of "
     "magnitude at most 2**63 - 1, got 99999999999999999999"),
    ({"clip_coef": math.inf}, "ppo config field `clip_coef`: must be a finite number, got inf"),
    ({"gamma": math.nan}, "ppo config field `gamma`: must be a finite number, got nan"),
    ({"update_epochs": True}, "ppo config field `update_epochs`: must be an integer, got True"),
    ({"update_epochs": 2.0}, "ppo config field `update_epochs`: must be an integer, got 2.0"),
    ({"anneal_lr": 1}, "ppo config field `anneal_lr`: must be true or false, got 1"),
    ({"activation": 3}, "ppo config field `activation`: must be a string, got 3"),
    ({"hidden": [8, "x"]}, "ppo config field `hidden`: must be a list of integers, got "
     "[8, 'x']"),
    ({"hidden": 8}, "ppo config field `hidden`: must be a list of integers, got 8"),
    ({"target_kl": "none"}, "ppo config field `target_kl`: must be a number or null, got 'none'"),
    ({"activation": "gelu"}, "ppo activation 'gelu' is not one of tanh, relu"),
])
def test_wrong_types_are_one_line_errors_naming_field_and_type(data: dict[str, Any],
                                                                expected: str) -> None:
    assert _error(PPOConfig, data) == expected


def test_types_are_checked_before_ranges() -> None:
    # num_minibatches > batch_size is a range rule; the type of num_steps is reported first
    assert "`num_steps`: must be an integer" in _error(
        PPOConfig, {"num_steps": "64", "num_minibatches": 10_000})
    # a string would have failed the comparison of the [0, 1] range check with a TypeError
    assert "`gamma`: must be a number" in _error(PPOConfig, {"gamma": "0.9"})


def test_direct_construction_is_checked_too() -> None:
    with pytest.raises(ConfigError, match="`update_epochs`: must be an integer, got True"):
        PPOConfig(update_epochs=True)
    with pytest.raises(ConfigError, match="`gpu_speed`: must be a finite number, got inf"):
        NodeGroup("g", 1, 8, gpu_speed=math.inf)
    with pytest.raises(ConfigError, match="`count`: must be an integer of magnitude"):
        NodeGroup("g", MAX_INT + 1, 8)


def test_ints_are_numbers_and_big_but_sane_ints_pass() -> None:
    assert PPOConfig.from_dict({"learning_rate": 1}).learning_rate == 1
    assert PPOConfig.from_dict({"seed": MAX_INT}).seed == MAX_INT


@pytest.mark.parametrize("cls", CONFIGS, ids=lambda c: c.__name__)
def test_every_config_refuses_unknown_fields_and_wrong_types(cls: type[Config]) -> None:
    message = _error(cls, {"no_such_field": 1})
    assert "unknown field(s) no_such_field; valid: " in message
    assert all(name in message for name in cls.field_names())
    for f in dataclasses.fields(cls):
        if f.type in ("int", "float", "int | None", "float | None"):
            assert f"field `{f.name}`: must be" in _error(cls, {f.name: [1]})
            assert f"field `{f.name}`: must be" in _error(cls, {f.name: math.inf})
        elif f.type == "bool":
            assert f"field `{f.name}`: must be true or false" in _error(cls, {f.name: "yes"})
        elif f.type in ("str", "str | None"):
            assert f"field `{f.name}`: must be a string" in _error(cls, {f.name: 5})
    assert "expected an object of fields" in _error(cls, [1])  # type: ignore[arg-type]


@pytest.mark.parametrize("cfg", [
    PPOConfig(hidden=(8, 4), episode_metric_names=("bsld",), target_kl=None),
    DDPPOConfig(sync_frac=0.6, num_envs=2), MarlConfig(allocator_hidden=(4,)),
    EnvConfig(baselines=("sjf",), compat="rlscheduler"), MarlEnvConfig(baselines=()),
    DatasetConfig(heuristics=("fcfs",)), OfflineConfig(dueling_hidden=(8,)),
    GpuDqnConfig(reward_scale_s=10.0), TuneConfig(factors=(0.5, 2.0)),
    IngestConfig(sacct_columns=("JobID", "State")),
    SimConfig(fairshare=FairshareConfig(weight_age=2.0)),
    WorkloadOptions(walltime_fallback=3600), GpuModel(partition_sensitivity=(("a", 0.5),)),
], ids=lambda c: type(c).__name__)
def test_json_round_trip(cfg: Config) -> None:
    data = json.loads(json.dumps(cfg.to_dict()))
    again = config_from_dict(data) if isinstance(cfg, PPOConfig) and not isinstance(
        cfg, MarlConfig) else type(cfg).from_dict(data)
    assert again == cfg and type(again) is type(cfg)


def test_fields_without_a_default_are_required() -> None:
    assert _error(NodeGroup, {"name": "cpu"}) == "node group config: missing field(s) count, cores"
    assert NodeGroup.from_dict({"name": "cpu", "count": 2, "cores": 4}).cores == 4


def test_tuple_of_fixed_length_and_union_fields() -> None:
    assert "`factors`: must be a list of 2 numbers, got [1.0]" in _error(
        TuneConfig, {"factors": [1.0]})
    assert WorkloadOptions.from_dict({"walltime_fallback": "max"}).walltime_fallback == "max"
    assert "`walltime_fallback`: must be a string or an integer, got 1.5" in _error(
        WorkloadOptions, {"walltime_fallback": 1.5})
    assert "`weight_age`: must be a number, got 'x'" in _error(
        SimConfig, {"fairshare": {"weight_age": "x"}})
