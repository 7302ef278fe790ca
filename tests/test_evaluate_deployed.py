"""``hpcpolicy evaluate`` on a policy folder: the policy as deployed (its card's guard applied,
as ``simulate`` and ``whatif`` run it) beside the raw learned policy (issue 43, item 5)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import invoke
from env_jobs import CLUSTER, random_workload, write_table
from test_evaluate_cli import check_document

pytest.importorskip("torch")
pytest.importorskip("onnxruntime")
pytest.importorskip("gymnasium")

WINDOWS = ("--backfill", "easy", "--windows", "3", "--window-size", "40", "--seed", "2")


def _card(fallback: str, active: bool) -> dict[str, Any]:
    """A minimal bound-card body whose guard names ``fallback``."""
    return {"format": "hpcpolicy.model-card", "card_version": 3, "algo": "ppo", "prior": None,
            "training_data": {"path": "jobs.parquet", "sha256": "ab" * 32},
            "period": {"part": "train", "jobs": [0, 100], "from": "2020-01-01",
                       "to": "2020-02-01"},
            "validation": None, "test": None, "skipped": "no test part", "warning": None,
            "guard": {"fallback": fallback, "rule": "beats-best-on-validation",
                      "active": active}}


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, str, Path]:
    """A log, an exported policy, and copies of it whose card's guard is active with the
    heuristic that does worst against the policy on the evaluated windows (and inactive)."""
    import torch

    from hpcpolicy.evaluate import EvaluateConfig, evaluate
    from hpcpolicy.learn.export import export_policy
    from hpcpolicy.learn.networks import ActorCritic
    from hpcpolicy.policies.heuristics import HEURISTICS
    from hpcpolicy.training.card import write_card

    tmp = tmp_path_factory.mktemp("deployed")
    table = write_table(tmp / "jobs.parquet", 300)
    torch.manual_seed(1)
    raw = export_policy(ActorCritic(7, 7), tmp / "raw" / "policy", k=16, metrics={},
                        config={"algo": "ppo", "seed": 1},
                        provenance={"reward": "bsld", "training_data": None})
    ev = evaluate(random_workload(300), CLUSTER, EvaluateConfig(
        policies=(*HEURISTICS, str(raw)), backfills=("easy",), windows=3, window_size=40,
        seed=2))
    bsld = {run.config.policy: float(run.summary["mean_bsld"]) for run in ev.runs}
    fallback = max(HEURISTICS, key=lambda h: bsld[h])
    assert bsld[fallback] > bsld[str(raw)]  # the guard replaces a policy that does better
    guarded = Path(shutil.copytree(raw, tmp / "guarded" / "policy"))
    write_card(guarded, _card(fallback, active=True))
    off = Path(shutil.copytree(raw, tmp / "off" / "policy"))
    write_card(off, _card(fallback, active=False))
    return table, guarded, fallback, off


def test_a_guarded_folder_shows_the_deployed_fallback_beside_the_raw_policy(
        setup: tuple[Path, Path, str, Path], tmp_path: Path) -> None:
    table, guarded, fallback, _ = setup
    out = tmp_path / "e.json"
    result = invoke("evaluate", str(table), "-p", f"sjf,{guarded}", *WINDOWS, "--json", str(out))
    assert result.exit_code == 0, result.output
    doc = json.loads(out.read_text())
    check_document(doc)
    rows = {r["policy"]: r for r in doc["runs"]}
    deployed = rows[f"{guarded} (deployed: fallback {fallback})"]
    raw = rows[str(guarded)]
    assert [r["policy"] for r in doc["runs"]] == ["sjf", deployed["policy"], str(guarded)]
    assert deployed["deployment"] == {
        "policy_dir": str(guarded), "row": "deployed", "guard": "active", "fallback": fallback,
        "deployed_vs_raw": pytest.approx(deployed["summary"]["mean_bsld"]
                                         / raw["summary"]["mean_bsld"] - 1)}
    assert raw["deployment"]["row"] == "raw" and raw["deployment"]["deployed_vs_raw"] is None
    assert deployed["summary"]["mean_bsld"] > raw["summary"]["mean_bsld"]
    assert doc["best_heuristic"]["easy"]["policy"] == "sjf"  # the rows of a folder never are
    text = " ".join(result.output.split())
    assert f"(deployed: {fallback})" in text and "(raw)" in text
    assert (f"{guarded}: its guard is active, so {fallback} runs in its place; under easy "
            f"{fallback} does worse than the raw policy on these windows (mean bsld "
            f"{deployed['summary']['mean_bsld']:.2f} against "
            f"{raw['summary']['mean_bsld']:.2f}, ") in text
    # what simulate runs for the folder on the same windows is the deployed row
    sim_out = tmp_path / "s.json"
    starts = ",".join(map(str, doc["windows"]["starts"]))
    result = invoke("simulate", str(table), "-p", str(guarded), "--backfill", "easy",
                    "--window-size", "40", "--window-starts", starts, "--json", str(sim_out))
    assert result.exit_code == 0, result.output
    sim = json.loads(sim_out.read_text())
    assert [r["summary"] for r in sim["runs"]] == [deployed["summary"]]


def test_an_inactive_guard_shows_the_policy_once(setup: tuple[Path, Path, str, Path],
                                                 tmp_path: Path) -> None:
    table, _, _, off = setup
    out = tmp_path / "e.json"
    result = invoke("evaluate", str(table), "-p", str(off), *WINDOWS, "--json", str(out))
    assert result.exit_code == 0, result.output
    doc = json.loads(out.read_text())
    check_document(doc)
    assert [r["policy"] for r in doc["runs"]] == [str(off)]
    assert doc["runs"][0]["deployment"]["row"] == "deployed and raw"
    assert doc["runs"][0]["deployment"]["guard"] == "off"
    assert "(guard off)" in result.output
