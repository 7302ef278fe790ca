"""A trained policy directory as an ordinary Policy: the same choices in simulate as in the env."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("onnxruntime")
pytest.importorskip("gymnasium")

from env_jobs import CLUSTER, random_workload  # noqa: E402

from hpcpolicy.deploy.learned import LearnedPolicy  # noqa: E402
from hpcpolicy.deploy.resolve import resolve_policy  # noqa: E402
from hpcpolicy.env import EnvConfig  # noqa: E402
from hpcpolicy.env.driver import EngineDriver, head_scores  # noqa: E402
from hpcpolicy.env.observe import Observer  # noqa: E402
from hpcpolicy.env.scheduling import SchedulingEnv  # noqa: E402
from hpcpolicy.errors import ArtifactError, ConfigError  # noqa: E402
from hpcpolicy.learn.export import export_policy  # noqa: E402
from hpcpolicy.learn.networks import ActorCritic  # noqa: E402
from hpcpolicy.policies.base import Policy  # noqa: E402
from hpcpolicy.sim.compiled import Stepper  # noqa: E402
from hpcpolicy.sim.engine import simulate  # noqa: E402
from hpcpolicy.sim.metrics import outcome_table, summarize  # noqa: E402
from hpcpolicy.sim.types import SimConfig  # noqa: E402

WORKLOAD = random_workload(200, seed=3)
K = 8


@pytest.fixture(scope="module")
def policy_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    torch.manual_seed(0)
    out = tmp_path_factory.mktemp("learned") / "policy"
    return export_policy(ActorCritic(7, 7), out, k=K, metrics={},
                         config={"algo": "ppo", "seed": 0, "hidden": [32, 16, 8],
                                 "activation": "tanh"},
                         provenance={"reward": "bsld", "training_data": None})


def _greedy_episode(policy: LearnedPolicy, backfill: str, start: int) -> dict[str, float]:
    env = SchedulingEnv(WORKLOAD, CLUSTER, EnvConfig(k=K, window_size=60, split="all",
                                                     backfill=backfill, baselines=()))
    obs, info = env.reset(options={"window_start": start})
    done = False
    while not done:
        slot = policy.artifact.choose(obs["jobs"], obs["cluster"], obs["mask"])
        obs, _, done, _, info = env.step(slot)
    return info["episode_metrics"]  # type: ignore[no-any-return]


@pytest.mark.parametrize("backfill", ["none", "easy"])
def test_simulate_replays_the_choices_the_env_makes(policy_dir: Path, backfill: str) -> None:
    policy = LearnedPolicy(policy_dir)
    assert isinstance(policy, Policy) and policy.k == K
    for start in (20, 90):
        window = WORKLOAD.take(np.arange(start, start + 60))
        result = simulate(window, CLUSTER, SimConfig(backfill=backfill), policy=policy)
        summary = summarize(outcome_table(window, result, identity=False), CLUSTER)
        fcfs = simulate(window, CLUSTER, SimConfig(policy="fcfs", backfill=backfill))
        assert not np.array_equal(result.start, fcfs.start)  # it really decides something
        metrics = _greedy_episode(policy, backfill, start)
        assert metrics["bsld"] == summary["mean_bsld"]
        assert metrics["wait_s"] == summary["mean_wait_s"]
        assert metrics["decisions"] == result.stats["decisions"]


@pytest.mark.parametrize("backfill", ["none", "easy", "conservative"])
def test_the_drivers_observations_are_the_observers_of_the_stepper_views(backfill: str) -> None:
    """What a policy sees in training (EngineDriver.observe, compiled) is what it sees in
    simulate (Observer.observe of the Stepper's QueueView), running jobs included."""
    window = WORKLOAD.take(np.arange(40, 140))
    cfg = SimConfig(backfill=backfill)
    stepper, driver = Stepper(window, CLUSTER, cfg), EngineDriver(window, CLUSTER, cfg)
    observer = Observer(window, driver.capacity, 8)
    rng = np.random.default_rng(0)
    checked = 0
    while (view := stepper.next_decision()) is not None:
        assert driver.advance() == len(view.jobs)
        expected = observer.observe(view.now, view.jobs, view.fits_now[:8], view.free,
                                    view.running_cores, view.running_req_end)
        obs = observer.empty()
        driver.observe(observer, obs)
        for key in expected:
            np.testing.assert_array_equal(obs[key], expected[key], err_msg=key)
        checked += len(view.running_cores) > 0 and len(view.jobs) > 8
        slot = int(rng.integers(len(view.jobs)))
        stepper.decide(head_scores(len(view.jobs), slot))
        driver.choose(slot)
    assert checked > 10


def test_policy_specs_resolve_to_heuristics_or_artifacts(policy_dir: Path,
                                                         tmp_path: Path) -> None:
    assert resolve_policy("SJF").name == "sjf"
    assert isinstance(resolve_policy(str(policy_dir)), LearnedPolicy)
    with pytest.raises(ConfigError, match=r"policy 'fifo' is neither a heuristic \(fcfs, .*\) "
                                          r"nor a trained policy directory"):
        resolve_policy("fifo")
    with pytest.raises(ArtifactError, match=r"no manifest\.json"):
        resolve_policy(str(tmp_path))


def test_a_policy_trained_on_other_features_is_refused(policy_dir: Path, tmp_path: Path) -> None:
    other = tmp_path / "policy"
    other.mkdir()
    for f in policy_dir.iterdir():
        (other / f.name).write_bytes(f.read_bytes())
    manifest = json.loads((other / "manifest.json").read_text())
    manifest["observation"]["job_features"][0]["name"] = "queue_position"
    (other / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ArtifactError, match=r"trained on job features .*'queue_position'"):
        LearnedPolicy(other)
