"""``hpcpolicy.evaluate``: identical windows of the test part, spread, best heuristic, learned."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from env_jobs import CLUSTER, random_workload

from hpcpolicy.errors import ConfigError
from hpcpolicy.evaluate import SPREAD_KEYS, EvaluateConfig, evaluate
from hpcpolicy.sim.engine import simulate
from hpcpolicy.sim.metrics import outcome_table, summarize

WORKLOAD = random_workload(400, seed=5)
CFG = EvaluateConfig(policies=("fcfs", "SJF", "f1"), backfills=("none", "easy"), windows=4,
                     window_size=50, seed=2)


def test_every_policy_runs_on_the_same_windows_of_the_test_part() -> None:
    ev = evaluate(WORKLOAD, CLUSTER, CFG)
    assert len(ev.starts) == 4 and all(280 <= s <= 350 for s in ev.starts)
    assert [(r.config.policy, r.config.backfill) for r in ev.runs] == [
        (p, b) for b in ("none", "easy") for p in ("fcfs", "sjf", "f1")]
    for run in ev.runs:
        assert [w.start for w in run.windows] == list(ev.starts)
    run = ev.runs[4]  # sjf with EASY, window by window as simulate computes it
    for w in run.windows:
        jobs = WORKLOAD.take(np.arange(w.start, w.start + 50))
        alone = simulate(jobs, CLUSTER, CFG.sim_config("sjf", "easy"))
        assert w.summary == summarize(outcome_table(jobs, alone, identity=False), CLUSTER)
    per_window = [w.summary["mean_bsld"] for w in run.windows]
    spread = ev.spread(run)
    assert set(spread) == set(SPREAD_KEYS)
    assert spread["mean_bsld"] == {"std": pytest.approx(np.std(per_window, ddof=1)),
                                   "min": min(per_window), "max": max(per_window)}
    best = ev.best_heuristics()
    assert set(best) == {"none", "easy"}
    for backfill, (_, bsld) in best.items():
        assert bsld == min(r.summary["mean_bsld"] for r in ev.runs
                           if r.config.backfill == backfill)
    assert all(ev.versus_best(r) is None for r in ev.runs)  # no learned policy here


def test_the_document_is_json_and_the_same_for_the_same_inputs() -> None:
    docs = [json.dumps(evaluate(WORKLOAD, CLUSTER, CFG).to_document(
        source="jobs.parquet", workload=WORKLOAD, cluster=CLUSTER), sort_keys=True)
        for _ in range(2)]
    assert docs[0] == docs[1]
    doc = json.loads(docs[0])
    assert doc["split"] == {"part": "test", "train_frac": 0.7, "jobs": [280, 400],
                            "workload_jobs": 400}
    assert doc["windows"]["starts"] == sorted(doc["windows"]["starts"])
    assert {r["kind"] for r in doc["runs"]} == {"heuristic"}


def test_the_split_decides_where_windows_may_lie() -> None:
    train = evaluate(WORKLOAD, CLUSTER, EvaluateConfig(policies=("fcfs",), split="train",
                                                       windows=3, window_size=50))
    assert all(s + 50 <= 280 for s in train.starts)
    explicit = EvaluateConfig(policies=("fcfs",), window_size=50, starts=(300, 350))
    assert evaluate(WORKLOAD, CLUSTER, explicit).starts == (300, 350)
    with pytest.raises(ConfigError, match=r"window start\(s\) \[100\] are not inside the test "
                                          r"part \(windows of 50 jobs start at 280\.\.350\)"):
        evaluate(WORKLOAD, CLUSTER, EvaluateConfig(policies=("fcfs",), window_size=50,
                                                   starts=(100,)))
    with pytest.raises(ConfigError, match=r"the test part holds 120 jobs .* fewer than one window"):
        evaluate(WORKLOAD, CLUSTER, EvaluateConfig(policies=("fcfs",), window_size=200))


def test_bad_configs_are_refused_before_any_work() -> None:
    for kwargs, message in (
        ({"policies": ()}, "at least one policy"),
        ({"policies": ("sjf", "sjf")}, "listed twice"),
        ({"backfills": ("fast",)}, r"backfill \['fast'\] must be among none, easy, conservative"),
        ({"split": "later"}, "split 'later' is not one of train, test, all"),
        ({"windows": 0}, "window count must be >= 1"),
        ({"compat": "rlscheduler", "backfills": ("conservative",)}, "no conservative"),
    ):
        with pytest.raises(ConfigError, match=message):
            EvaluateConfig(**kwargs)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="policy 'fifo' is neither a heuristic"):
        evaluate(WORKLOAD, CLUSTER, EvaluateConfig(policies=("fifo",), window_size=50))


def test_a_learned_policy_is_compared_with_the_best_heuristic(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    pytest.importorskip("onnxruntime")
    pytest.importorskip("gymnasium")
    from hpcpolicy.learn.export import export_policy
    from hpcpolicy.learn.networks import ActorCritic

    torch.manual_seed(1)
    path = export_policy(ActorCritic(7, 7), tmp_path / "policy", k=16, metrics={},
                         config={"algo": "ppo", "seed": 1},
                         provenance={"reward": "bsld", "training_data": None})
    cfg = EvaluateConfig(policies=("sjf", "fcfs", str(path)), backfills=("easy",), windows=2,
                         window_size=50)
    ev = evaluate(WORKLOAD, CLUSTER, cfg)
    learned = ev.runs[2]
    assert learned.config.policy == str(path) and set(ev.learned) == {str(path)}
    assert ev.learned[str(path)]["k"] == 16 and ev.learned[str(path)]["reward"] == "bsld"
    name, bsld = ev.best_heuristics()["easy"]
    assert name in ("sjf", "fcfs")
    assert ev.versus_best(learned) == pytest.approx(learned.summary["mean_bsld"] / bsld - 1)
    doc = ev.to_document(source="t", workload=WORKLOAD, cluster=CLUSTER)
    assert [r["kind"] for r in doc["runs"]] == ["heuristic", "heuristic", "learned"]
