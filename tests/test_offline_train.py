"""Offline training: masked networks, every algorithm end to end, reproducible weights."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("d3rlpy")
pytest.importorskip("onnxruntime")

import torch
from env_jobs import CLUSTER
from offline_jobs import logged_workload

from hpcpolicy.deploy.learned import LearnedPolicy
from hpcpolicy.learn.networks import MASKED_LOGIT
from hpcpolicy.offline.config import OFFLINE_ALGOS, DatasetConfig, OfflineConfig
from hpcpolicy.offline.dataset import build_dataset
from hpcpolicy.offline.layout import obs_dim, unpack
from hpcpolicy.offline.store import StoredDataset, load_dataset, save_dataset
from hpcpolicy.offline.train import SCORER_FILE, train_offline
from hpcpolicy.sim.engine import simulate
from hpcpolicy.sim.types import SimConfig

TINY: dict[str, Any] = {"steps": 60, "steps_per_epoch": 30, "batch_size": 32,
                        "target_update_interval": 20}


@pytest.fixture(scope="module")
def lcfs(tmp_path_factory: pytest.TempPathFactory) -> StoredDataset:
    """Rollouts of LCFS: the action is always the last valid slot."""
    cfg = DatasetConfig(source="heuristics", k=8, window_size=40, heuristics=("lcfs",),
                        epsilon=0.0)
    built = build_dataset(logged_workload(300), CLUSTER, cfg)
    path = tmp_path_factory.mktemp("offline") / "lcfs"
    return load_dataset(save_dataset(built, path, provenance={
        "training_data": {"path": "jobs.parquet", "sha256": "0" * 64}}))


def test_empty_slots_score_the_masked_constant_and_heads_pass_scores_through() -> None:
    from hpcpolicy.offline.networks import SlotScorerFactory, freeze_heads
    from hpcpolicy.offline.quiet import d3rlpy_module

    encoder = SlotScorerFactory(hidden=[4], activation="tanh").create((obs_dim(3),))
    x = torch.rand(2, obs_dim(3))
    x[:, -3:] = torch.tensor([[1.0, 0.0, 0.0], [1.0, 1.0, 0.0]])
    out = encoder(x)
    assert (out[0, 1:] == MASKED_LOGIT).all() and (out[1, 2] == MASKED_LOGIT).all()
    assert (out[1, :2] > MASKED_LOGIT).all()
    d3 = d3rlpy_module()
    policy = d3.models.torch.CategoricalPolicy(encoder, 3, 3)
    held = dataclasses.make_dataclass("Held", [("imitator", object)])(policy)
    assert freeze_heads(held) == 1
    torch.testing.assert_close(policy(x).logits.exp().sum(-1), torch.ones(2))
    assert policy(x).probs[0, 1:].sum() == 0 and not policy._fc.weight.requires_grad


def test_the_dueling_head_adds_a_state_value_and_keeps_the_scorers_argmax() -> None:
    from hpcpolicy.offline.networks import SlotScorerFactory

    encoder = SlotScorerFactory(hidden=[4], value_hidden=[4, 4]).create((obs_dim(4),))
    x = torch.rand(3, obs_dim(4))
    x[:, -4:] = torch.tensor([[1.0, 1.0, 1.0, 0.0], [1.0, 0.0, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0]])
    q = encoder(x)
    mask = x[:, -4:] > 0.5
    jobs, cluster, _ = unpack(x, 4)
    a = encoder.scorer(jobs, cluster)
    assert encoder.value is not None
    v = encoder.value(jobs, cluster, mask)
    for row in range(3):
        valid = mask[row]
        torch.testing.assert_close(q[row, valid].mean(), v[row])  # mean advantage is 0
        assert int(q[row].argmax()) == int(torch.where(valid, a[row], -torch.inf).argmax())
        assert (q[row, ~valid] == MASKED_LOGIT).all()


@pytest.mark.parametrize("algo", list(OFFLINE_ALGOS))
def test_every_algorithm_trains_and_exports_a_policy_simulate_runs(
        algo: str, lcfs: StoredDataset, tmp_path: Path) -> None:
    result = train_offline(lcfs, OfflineConfig(algo=algo, seed=2, **TINY), tmp_path / algo)
    assert result.steps == 60 and "val_action_match" in result.last_metrics
    files = {p.name for p in (tmp_path / algo).iterdir()}
    assert {"config.json", "metrics.csv", "d3rlpy", "policy", "result.json", SCORER_FILE} <= files
    assert not Path("d3rlpy_logs").exists()
    policy = LearnedPolicy(result.policy)
    assert policy.k == 8 and policy.artifact.manifest["algo"] == algo
    w = logged_workload(300).take(np.arange(250, 290))
    sim = simulate(w, CLUSTER, SimConfig(backfill="easy"), policy=policy)
    assert (sim.start >= 0).all()


def test_behaviour_cloning_learns_the_masked_last_valid_slot(lcfs: StoredDataset,
                                                             tmp_path: Path) -> None:
    cfg = OfflineConfig(algo="bc", seed=1, steps=600, steps_per_epoch=300, batch_size=64,
                        learning_rate=3e-3)
    result = train_offline(lcfs, cfg, tmp_path / "bc")
    assert result.last_metrics["val_action_match"] > 0.9
    assert result.last_metrics["test_action_match"] > 0.9


def test_the_same_seed_gives_the_same_weights(lcfs: StoredDataset, tmp_path: Path) -> None:
    def weights(run: str, seed: int) -> dict[str, torch.Tensor]:
        train_offline(lcfs, OfflineConfig(algo="cql", seed=seed, **TINY), tmp_path / run)
        return torch.load(tmp_path / run / SCORER_FILE, weights_only=True)  # type: ignore[no-any-return]

    a, b, c = weights("a", 4), weights("b", 4), weights("c", 5)
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not all(torch.equal(a[k], c[k]) for k in a)
