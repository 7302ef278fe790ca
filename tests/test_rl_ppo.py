"""PPO end to end on the toy env: learning, determinism, run directory, Ctrl-C, crash, resume."""

from __future__ import annotations

import csv
import json
import os
import signal
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from benchmarks.builders.rl_toy_env import ToyQueueEnv, make_toy_env  # noqa: E402
from hpcpolicy.errors import ConfigError  # noqa: E402
from hpcpolicy.learn.runs import load_checkpoint  # noqa: E402
from hpcpolicy.ppo.config import PPOConfig  # noqa: E402
from hpcpolicy.ppo.ppo import train  # noqa: E402

SMALL = PPOConfig(total_steps=1024, num_envs=4, num_steps=32, num_minibatches=4,
                  update_epochs=2, checkpoint_every=2, seed=3,
                  episode_metric_names=("optimal_frac", "invalid_actions"))
TIMING = {"wall_time_s", "sps"}


def _metrics(run_dir: Path) -> list[dict[str, str]]:
    with open(run_dir / "metrics.csv", newline="") as f:
        return [{k: v for k, v in row.items() if k not in TIMING} for row in csv.DictReader(f)]


def _model(run_dir: Path) -> dict[str, Any]:
    model: dict[str, Any] = load_checkpoint(run_dir / "checkpoints" / "last.pt")["model"]
    return model


def _same_model(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def _toy() -> ToyQueueEnv:
    return ToyQueueEnv(k=8, episode_len=16)


def test_run_directory_layout(tmp_path: Path) -> None:
    result = train(SMALL, _toy, tmp_path / "run")
    run = tmp_path / "run"
    assert result.global_step == 1024 and result.updates == 8 and not result.interrupted
    assert json.loads((run / "config.json").read_text())["algo"] == "ppo"
    rows = _metrics(run)
    assert [int(r["update"]) for r in rows] == list(range(1, 9))
    assert {"losses/approx_kl", "charts/episodic_return", "env/optimal_frac"} <= set(rows[0])
    assert {float(r["env/invalid_actions"]) for r in rows} == {0.0}  # masked slots never sent
    ckpt = load_checkpoint(run / "checkpoints" / "last.pt")  # weights_only=True inside
    assert ckpt["counters"]["global_step"] == 1024 and len(ckpt["workers"]) == 1
    assert (run / "policy" / "manifest.json").is_file()
    assert json.loads((run / "result.json").read_text())["updates"] == 8


def test_snapshots_every_n_updates_are_policies_of_that_moment(tmp_path: Path) -> None:
    from hpcpolicy.ppo.warm_start import policy_weights

    def weights(policy: Path) -> dict[str, Any]:
        return policy_weights(policy)

    train(replace(SMALL, snapshot_every=3), _toy, tmp_path / "a")
    snapshots = tmp_path / "a" / "snapshots"
    assert sorted(p.name for p in snapshots.iterdir()) == ["update_000003", "update_000006"]
    manifest = json.loads((snapshots / "update_000003" / "manifest.json").read_text())
    assert manifest["metrics"]["update"] == 3
    final = weights(tmp_path / "a" / "policy")
    assert not _same_model(weights(snapshots / "update_000006"), final)
    # snapshots change nothing else, and one at the last update is the final policy
    train(replace(SMALL, snapshot_every=8), _toy, tmp_path / "b")
    assert _same_model(weights(tmp_path / "b" / "snapshots" / "update_000008"), final)
    assert _same_model(_model(tmp_path / "a"), _model(tmp_path / "b"))
    with pytest.raises(ConfigError, match="snapshot_every"):
        replace(SMALL, snapshot_every=-1)


def test_learns_to_pick_the_shortest_job(tmp_path: Path) -> None:
    cfg = PPOConfig(total_steps=8192, num_envs=4, num_steps=128, learning_rate=3e-3, seed=1,
                    checkpoint_every=100, episode_metric_names=("optimal_frac",))
    train(cfg, _toy, tmp_path / "run")
    rows = _metrics(tmp_path / "run")
    random_policy = np.mean([1 / n for n in range(1, 9)])  # about 0.34
    final = np.mean([float(r["env/optimal_frac"]) for r in rows[-3:]])
    assert final > random_policy + 0.15, (final, random_policy)


def test_same_seed_same_results_other_seed_other_results(tmp_path: Path) -> None:
    a = train(SMALL, _toy, tmp_path / "a")
    b = train(SMALL, _toy, tmp_path / "b")
    assert _same_model(_model(tmp_path / "a"), _model(tmp_path / "b"))
    assert _metrics(tmp_path / "a") == _metrics(tmp_path / "b")
    assert a.last_metrics["losses/value_loss"] == b.last_metrics["losses/value_loss"]
    train(replace(SMALL, seed=4), _toy, tmp_path / "c")
    assert not _same_model(_model(tmp_path / "a"), _model(tmp_path / "c"))


def _counting_env(trigger_at: int, action: Callable[[], None]) -> Callable[[], ToyQueueEnv]:
    """Environments sharing one step counter; ``action()`` runs when it reaches trigger_at."""
    count = {"n": 0}

    def hook(_: int) -> None:
        count["n"] += 1
        if count["n"] == trigger_at:
            action()

    return lambda: ToyQueueEnv(k=8, episode_len=16, on_step=hook)


def test_ctrl_c_checkpoints_and_resume_is_identical(tmp_path: Path) -> None:
    before = signal.getsignal(signal.SIGINT)  # ignored, not Python's, when started with nohup
    train(SMALL, _toy, tmp_path / "straight")
    # SIGINT in the middle of update 3's rollout (steps 257..384 of 4 envs x 32 steps)
    make = _counting_env(300, lambda: os.kill(os.getpid(), signal.SIGINT))
    first = train(SMALL, make, tmp_path / "resumed")
    assert first.interrupted and first.updates == 3 and first.global_step == 384
    assert load_checkpoint(tmp_path / "resumed/checkpoints/last.pt")["counters"]["update"] == 3
    assert (tmp_path / "resumed/policy/manifest.json").is_file()
    second = train(SMALL, _toy, tmp_path / "resumed", resume=True)
    assert not second.interrupted and second.global_step == 1024
    assert _same_model(_model(tmp_path / "straight"), _model(tmp_path / "resumed"))
    assert _metrics(tmp_path / "straight") == _metrics(tmp_path / "resumed")
    # the signal handlers are restored afterwards
    assert signal.getsignal(signal.SIGINT) is before


def test_crash_leaves_last_checkpoint_and_resume_is_identical(tmp_path: Path) -> None:
    cfg = replace(SMALL, gamma=0.9)  # episodes truncated after 5 steps: bootstrapped
    train(cfg, lambda: make_toy_env(k=8, episode_len=16, max_episode_steps=5),
          tmp_path / "straight")

    def crash() -> None:
        raise RuntimeError("simulated crash")

    hook_env = _counting_env(5 * 128 + 7, crash)  # during update 6; last checkpoint: update 4

    def make() -> Any:
        import gymnasium as gym
        return gym.wrappers.TimeLimit(hook_env(), max_episode_steps=5)

    with pytest.raises(RuntimeError, match="simulated crash"):
        train(cfg, make, tmp_path / "resumed")
    assert load_checkpoint(tmp_path / "resumed/checkpoints/last.pt")["counters"]["update"] == 4
    train(cfg, lambda: make_toy_env(k=8, episode_len=16, max_episode_steps=5),
          tmp_path / "resumed", resume=True)
    assert _same_model(_model(tmp_path / "straight"), _model(tmp_path / "resumed"))
    assert _metrics(tmp_path / "straight") == _metrics(tmp_path / "resumed")


def test_resume_checks(tmp_path: Path) -> None:
    train(SMALL, _toy, tmp_path / "run")
    with pytest.raises(ConfigError, match="already holds a run"):
        train(SMALL, _toy, tmp_path / "run")
    changed = replace(SMALL, learning_rate=1e-3, total_steps=2048)
    with pytest.raises(ConfigError, match=r"\(learning_rate: 0.0003 -> 0.001\); only total_steps"):
        train(changed, _toy, tmp_path / "run", resume=True)
    with pytest.raises(ConfigError, match="no checkpoint at"):
        train(SMALL, _toy, tmp_path / "empty", resume=True)
    result = train(replace(SMALL, total_steps=1536), _toy, tmp_path / "run", resume=True)
    assert result.global_step == 1536 and result.updates == 12


def test_setup_objects_are_frozen_only_while_training() -> None:
    import gc

    from hpcpolicy.ppo.ppo import setup_objects_frozen

    before = gc.get_freeze_count()
    with setup_objects_frozen():
        assert gc.get_freeze_count() > before
    assert gc.get_freeze_count() == before


def test_update_on_the_slots_in_use_equals_the_update_on_all() -> None:
    from types import SimpleNamespace

    import torch

    from hpcpolicy.learn.networks import ActorCritic, slots_in_use
    from hpcpolicy.ppo.ppo import Rollout, SingleProcess, optimise

    cfg = PPOConfig(num_envs=2, num_steps=8, num_minibatches=2, update_epochs=2, target_kl=None)
    torch.manual_seed(0)
    buf = Rollout(cfg, SimpleNamespace(k=16, job_dim=5, cluster_dim=3), torch.device("cpu"))
    buf.jobs.uniform_()
    buf.cluster.uniform_()
    queue = torch.randint(1, 6, (8, 2))  # jobs waiting, in the first slots
    buf.mask[:] = torch.arange(16) < queue.unsqueeze(-1)
    buf.actions[:] = (torch.rand(8, 2) * queue).long()
    buf.logprobs.uniform_(-2, 0)
    buf.values.normal_()
    advantages, returns = torch.randn(8, 2), torch.randn(8, 2)
    assert slots_in_use(buf.mask) == 5

    jobs, cluster, mask = buf.jobs.flatten(0, 1), buf.cluster.flatten(0, 1), buf.mask.flatten(0, 1)
    outputs = []
    for slots in (None, 5):
        torch.manual_seed(1)
        agent = ActorCritic(5, 3)
        optimizer = torch.optim.Adam(agent.parameters(), lr=1e-2)
        gen = torch.Generator().manual_seed(2)
        optimise(agent, optimizer, buf, 8, advantages, returns, cfg, SingleProcess(), 1.0, gen,
                 slots)
        with torch.no_grad():
            # the policy (not the scorer's last bias, to which the softmax is blind) and value
            logp = torch.log_softmax(agent.masked_logits(jobs, cluster, mask), dim=-1)
            outputs.append((logp.where(mask, 0.0), agent.get_value(jobs, cluster, mask)))
    torch.testing.assert_close(outputs[1], outputs[0])
    untrained = ActorCritic(5, 3).get_value(jobs, cluster, mask)
    assert not torch.allclose(untrained, outputs[0][1])
