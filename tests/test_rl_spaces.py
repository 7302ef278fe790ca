"""The observation contract: spaces, normalisation, manifest spec; the toy env follows it."""

from __future__ import annotations

import json

import numpy as np
import pytest

gym = pytest.importorskip("gymnasium")

from gymnasium.utils.env_checker import check_env  # noqa: E402

from benchmarks.builders.rl_toy_env import ToyQueueEnv  # noqa: E402
from hpcpolicy.env.spaces import (  # noqa: E402
    CLUSTER_FEATURES,
    DEFAULT_K,
    JOB_FEATURES,
    action_space,
    encode_observation,
    feature_spec,
    normalise,
    observation_space,
)


def test_default_spaces() -> None:
    space = observation_space()
    assert space["jobs"].shape == (DEFAULT_K, len(JOB_FEATURES)) == (128, 7)
    assert space["cluster"].shape == (len(CLUSTER_FEATURES),)
    assert space["mask"].n == DEFAULT_K  # type: ignore[attr-defined]
    assert int(action_space().n) == DEFAULT_K


def test_feature_names_are_unique_and_spec_is_json() -> None:
    names = [f.name for f in JOB_FEATURES + CLUSTER_FEATURES]
    assert len(names) == len(set(names))
    spec = json.loads(json.dumps(feature_spec(16)))
    assert spec["k"] == 16 and [f["name"] for f in spec["job_features"]] == names[:7]


def test_normalise_maps_into_unit_interval() -> None:
    raw = np.array([[0.0, 1.0, 2.0, -1.0, 0.5, 1e9, 1.0]])
    out = normalise(raw, JOB_FEATURES)
    assert out.dtype == np.float32 and out.min() >= 0.0 and out.max() <= 1.0
    # log1p features: the scale maps to exactly 1, half-way in log space below it
    wait = JOB_FEATURES[0]
    assert normalise([[wait.scale, 0, 0, 0, 0, 0, 0]], JOB_FEATURES)[0, 0] == 1.0
    np.testing.assert_allclose(normalise([[np.sqrt(1 + wait.scale) - 1, 0, 0, 0, 0, 0, 0]],
                                         JOB_FEATURES)[0, 0], 0.5, rtol=1e-6)
    with pytest.raises(ValueError, match="expected 7 feature columns, got 3"):
        normalise(np.zeros((2, 3)), JOB_FEATURES)


def test_toy_env_follows_the_contract() -> None:
    env = ToyQueueEnv(k=6)
    check_env(env, skip_render_check=True)
    obs, info = env.reset(seed=3)
    assert env.observation_space.contains(obs)
    np.testing.assert_array_equal(info["action_mask"], obs["mask"])
    action = env.action_space.sample(mask=info["action_mask"])
    assert obs["mask"][action] == 1


def test_encode_observation_follows_the_declared_order() -> None:
    names = [f.name for f in JOB_FEATURES]
    # raw value i * 0.1 for feature i: linear features keep it, so the column order shows
    raw = {name: [0.1 * i] * 3 for i, name in enumerate(names)}
    cluster = {f.name: 0.5 for f in CLUSTER_FEATURES}
    obs = encode_observation(raw, cluster, k=5)
    assert gym.spaces.Dict(observation_space(5).spaces).contains(obs)
    assert obs["mask"].tolist() == [1, 1, 1, 0, 0]
    for i, f in enumerate(JOB_FEATURES):
        expected = normalise([[0.1 * j for j in range(len(names))]], JOB_FEATURES)[0, i]
        assert obs["jobs"][0, i] == expected, f.name
    assert not obs["jobs"][3:].any()
    # more jobs than slots: the first k are shown
    many = {name: np.arange(9.0) for name in names}
    assert encode_observation(many, cluster, k=4)["mask"].tolist() == [1, 1, 1, 1]
    with pytest.raises(KeyError, match="missing feature\\(s\\) \\['fits_now'\\]"):
        encode_observation({n: [0] for n in names[:-1]}, cluster, k=2)
