"""A residual policy's prior heuristic: it orders the slots, and an untrained policy is it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("onnxruntime")
pytest.importorskip("gymnasium")

from env_jobs import CLUSTER, random_workload  # noqa: E402

from hpcpolicy.deploy.learned import LearnedPolicy  # noqa: E402
from hpcpolicy.env import EnvConfig  # noqa: E402
from hpcpolicy.env.scheduling import SchedulingEnv  # noqa: E402
from hpcpolicy.errors import ConfigError  # noqa: E402
from hpcpolicy.learn.export import export_policy  # noqa: E402
from hpcpolicy.learn.networks import ActorCritic  # noqa: E402
from hpcpolicy.sim.engine import simulate  # noqa: E402
from hpcpolicy.sim.metrics import outcome_table, summarize  # noqa: E402
from hpcpolicy.sim.types import SimConfig  # noqa: E402

WORKLOAD = random_workload(300, seed=1)
K = 8
_WALLTIME = 1  # column of req_walltime_s in the job features
Obs = dict[str, Any]


def _episode(cfg: EnvConfig, choose: Callable[[Obs], int],
             start: int = 30) -> tuple[list[Obs], dict[str, float]]:
    """Observations of one episode and its metrics; ``choose(obs)`` gives each slot."""
    env = SchedulingEnv(WORKLOAD, CLUSTER, cfg)
    obs, info = env.reset(options={"window_start": start})
    seen, done = [obs], False
    while not done:
        obs, _, done, _, info = env.step(choose(obs))
        seen.append(obs)
    return seen, info["episode_metrics"]


@pytest.mark.parametrize(("prior", "backfill", "warm"), [
    ("sjf", "none", False), ("lcfs", "easy", True), ("wfp3", "easy", False),
    ("unicep", "conservative", True), ("f1", "none", True), ("largest", "easy", False)])
def test_always_the_first_slot_is_the_prior_heuristic(prior: str, backfill: str,
                                                      warm: bool) -> None:
    """Slot 0 as head, the others in the prior's order: the heuristic's schedule exactly."""
    cfg = EnvConfig(k=K, window_size=40, split="all", backfill=backfill, warm=warm,
                    prior=prior, baselines=(prior,))
    _, metrics = _episode(cfg, lambda _obs: 0)
    assert metrics["bsld_vs_best"] == 1.0 and metrics["invalid_actions"] == 0
    # and the same slot without a prior is FCFS, a different schedule
    _, fcfs = _episode(EnvConfig(k=K, window_size=40, split="all", backfill=backfill,
                                 warm=warm, baselines=(prior,)), lambda _obs: 0)
    assert fcfs["bsld"] != metrics["bsld"]


def test_slots_hold_the_priors_best_jobs_best_first() -> None:
    """Under SJF the slots hold the k shortest requests, shortest first, even when more wait
    (then the oldest k would show others)."""
    cfg = EnvConfig(k=4, window_size=60, split="all", prior="sjf", baselines=())
    rng = np.random.default_rng(0)
    seen, _ = _episode(cfg, lambda obs: int(rng.choice(np.flatnonzero(obs["mask"]))))
    full = 0
    for obs in seen[:-1]:
        shown = obs["jobs"][obs["mask"] == 1, _WALLTIME]
        assert np.all(np.diff(shown) >= 0)
        full += int(obs["mask"].all())
    assert full > 5  # the queue often held more than k


def test_an_unknown_prior_is_refused() -> None:
    with pytest.raises(ConfigError, match="prior"):
        EnvConfig(prior="fairshare")


@pytest.mark.parametrize("backfill", ["none", "easy"])
def test_an_untrained_residual_policy_deploys_as_its_prior(tmp_path: Path,
                                                           backfill: str) -> None:
    """Exported with its slot order, the rank-biased network schedules as SJF in simulate,
    and a trained-looking one makes in simulate the choices it makes in the env."""
    torch.manual_seed(0)
    config = {"algo": "ppo", "seed": 0, "hidden": [32, 16, 8], "activation": "tanh"}
    untrained = export_policy(ActorCritic(7, 7, rank_bias=1.0), tmp_path / "untrained", k=K,
                              metrics={}, config=config, slot_order="sjf")
    window = WORKLOAD.take(np.arange(30, 90))
    sjf = simulate(window, CLUSTER, SimConfig(policy="sjf", backfill=backfill))
    learned = simulate(window, CLUSTER, SimConfig(backfill=backfill),
                       policy=LearnedPolicy(untrained))
    np.testing.assert_array_equal(learned.start, sjf.start)

    agent = ActorCritic(7, 7, rank_bias=0.3)
    with torch.no_grad():
        agent.scorer.mlp[-1].weight.mul_(300.0)  # scores that overrule the bias
    trained = LearnedPolicy(export_policy(agent, tmp_path / "trained", k=K, metrics={},
                                          config=config, slot_order="sjf"))
    assert trained.artifact.slot_order == "sjf"
    result = simulate(window, CLUSTER, SimConfig(backfill=backfill), policy=trained)
    assert not np.array_equal(result.start, sjf.start)  # it departs from the prior
    cfg = EnvConfig(k=K, window_size=60, split="all", backfill=backfill, prior="sjf",
                    baselines=())
    _, metrics = _episode(cfg, lambda obs: trained.artifact.choose(
        obs["jobs"], obs["cluster"], obs["mask"]))
    assert metrics["decisions"] == result.stats["decisions"]
    summary = summarize(outcome_table(window, result, identity=False), CLUSTER)
    assert metrics["bsld"] == summary["mean_bsld"]


def test_the_rank_bias_is_part_of_the_exported_scores(tmp_path: Path) -> None:
    """ONNX, TorchScript and the training network give the same scores, for any K."""
    from hpcpolicy.artifact import load_policy

    torch.manual_seed(1)
    agent = ActorCritic(7, 7, rank_bias=0.7)
    out = export_policy(agent, tmp_path / "p", k=K, metrics={}, slot_order="wfp3",
                        config={"algo": "ppo", "seed": 0, "hidden": [32, 16, 8],
                                "activation": "tanh"})
    for k in (3, K, 20):
        jobs, cluster = torch.rand(2, k, 7), torch.rand(2, 7)
        mask = torch.ones(2, k, dtype=torch.bool)
        mask[1, k // 2:] = False
        expected = agent.masked_logits(jobs, cluster, mask).detach().numpy()
        got = load_policy(out).scores(jobs.numpy(), cluster.numpy(), mask.numpy())
        np.testing.assert_allclose(got[mask.numpy()], expected[mask.numpy()], rtol=1e-5,
                                   atol=1e-5)
        _, logprob, _, _ = agent.get_action_and_value(jobs, cluster, mask,
                                                      action=torch.zeros(2, dtype=torch.long))
        ref = torch.log_softmax(agent.masked_logits(jobs, cluster, mask), -1)[:, 0]
        torch.testing.assert_close(logprob, ref)
