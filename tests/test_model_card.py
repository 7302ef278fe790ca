"""The model card ``hpcpolicy train`` writes (``policy/card.json``), what ``whatif`` says of it,
and the guard that deploys the fallback heuristic in place of a policy that lost."""

from __future__ import annotations

import json
import shlex
import shutil
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import invoke, one_line_error
from env_jobs import CORES, write_table

from benchmarks.builders.job_tables import write_job_table
from hpcpolicy import schemas
from hpcpolicy.training.card import write_card

pytest.importorskip("torch")
pytest.importorskip("gymnasium")
jsonschema = pytest.importorskip("jsonschema")

ROLLOUT = {"num_steps": 32, "num_minibatches": 2, "update_epochs": 1, "checkpoint_every": 2}
TINY = ("--steps", "128", "--num-envs", "2", "--window-size", "40", "--k", "8", "--seed", "3",
        "--backfill", "easy")


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, str]:
    """A job table, the policy a tiny ``train`` left, and what the command printed."""
    tmp = tmp_path_factory.mktemp("card")
    table = write_table(tmp / "jobs.parquet", 300)
    config = tmp / "ppo.json"
    config.write_text(json.dumps(ROLLOUT))
    result = invoke("train", str(table), *TINY, "--val-frac", "0.3", "--config", str(config),
                    "-o", str(tmp / "run"))
    assert result.exit_code == 0, result.output
    return table, tmp / "run" / "policy", result.output


def _card(policy: Path) -> dict[str, Any]:
    card: dict[str, Any] = json.loads((policy / "card.json").read_text())
    return card


def test_the_card_follows_its_schema_and_names_the_training_period(
        trained: tuple[Path, Path, str]) -> None:
    table, policy, output = trained
    card = _card(policy)
    jsonschema.Draft202012Validator.check_schema(schemas.load("model_card"))
    jsonschema.validate(card, schemas.load("model_card"))
    assert card["training_data"]["path"] == str(table)
    assert card["period"]["part"] == "train" and card["period"]["jobs"] == [0, 120]
    selection = card["selection"]  # the final policy and a snapshot after each of 2 updates
    names = [c["policy"] for c in selection["candidates"]]
    assert names == ["final", "update_000001", "update_000002"]
    chosen = min(selection["candidates"], key=lambda c: c["mean_bsld"])
    assert selection["chosen"] == chosen["policy"]
    if chosen["policy"] != "final":  # the chosen snapshot now sits in policy/
        snap = policy.parent / "snapshots" / chosen["policy"]
        assert {f.name: f.read_bytes() for f in snap.iterdir()} == \
            {f.name: f.read_bytes() for f in policy.iterdir() if f.name != "card.json"}
    val = card["validation"]  # jobs 120..209: after every episode, before every test window
    assert val["jobs"] == [120, 210] and val["starts"] == [130, 170]
    test = card["test"]
    assert test["backfill"] == "easy" and test["window_size"] == 40
    assert all(210 <= s <= 260 for s in test["starts"])
    from hpcpolicy.policies.heuristics import HEURISTICS

    assert [s["policy"] for s in test["scores"]] == [*HEURISTICS, str(policy)]
    lost = test["versus_best"] > 0
    guard = card["guard"]  # decided on validation, whatever the test part says
    from hpcpolicy.training.validation import fallback_of, heuristics_too_close

    assert guard == {"fallback": fallback_of(val),
                     "rule": "beats-best-on-validation",
                     "active": not val["decision"]["deploy"]}
    assert val["decision"]["windows"] == 2
    too_close = heuristics_too_close(val)
    assert (card["warning"] is not None) == (lost or guard["active"] or too_close is not None)
    assert too_close is None or too_close in card["warning"]
    text = " ".join(output.split())
    assert "model card (card.json): trained on" in text
    assert f"same windows: {test['evaluate']}" in text
    assert ("warning: the policy loses to" in text) == lost
    assert "validation (jobs 120..209, 2 window(s))" in text


def test_the_cards_numbers_are_what_evaluate_prints(trained: tuple[Path, Path, str],
                                                    tmp_path: Path) -> None:
    _, policy, _ = trained
    card = _card(policy)
    out = tmp_path / "e.json"
    args = shlex.split(card["test"]["evaluate"])[2:]  # drop "hpcpolicy evaluate"
    result = invoke("evaluate", *args, "--json", str(out))
    assert result.exit_code == 0, result.output
    _same_figures(json.loads(out.read_text()), card, str(policy))


def _same_figures(doc: dict[str, Any], card: dict[str, Any], policy: str) -> None:
    """``evaluate``'s document (of ``policy``) has the card's test figures: the card scores
    the raw policy, which it decides the guard on; an active guard's deployed row is then the
    fallback heuristic's, which the card scores among the heuristics."""
    assert doc["windows"]["starts"] == card["test"]["starts"]
    shown = {r["policy"]: {"mean_bsld": r["summary"]["mean_bsld"], **r["spread"]["mean_bsld"]}
             for r in doc["runs"]}
    scores = {s["policy"]: {k: s[k] for k in ("mean_bsld", "std", "min", "max")}
              for s in card["test"]["scores"]}
    guard = card["guard"]
    if guard["active"]:
        deployed = shown.pop(f"{policy} (deployed: fallback {guard['fallback']})")
        assert deployed == scores[guard["fallback"]]
    scores[policy] = scores.pop(card["test"]["scores"][-1]["policy"])  # a copy: its own path
    assert scores == shown
    assert doc["best_heuristic"]["easy"] == card["test"]["best_heuristic"]
    assert doc["runs"][-1]["bsld_vs_best_heuristic"] == card["test"]["versus_best"]


def test_a_guarded_cards_figures_are_evaluates_raw_and_deployed_rows(
        trained: tuple[Path, Path, str], tmp_path: Path) -> None:
    _, policy, _ = trained
    card = _card(policy)
    guarded = _guarded(policy, tmp_path / "guarded", card["guard"]["fallback"])
    out = tmp_path / "e.json"
    args = shlex.split(card["test"]["evaluate"].replace(str(policy), str(guarded)))[2:]
    result = invoke("evaluate", *args, "--json", str(out))
    assert result.exit_code == 0, result.output
    _same_figures(json.loads(out.read_text()), _card(guarded), str(guarded))


def _guarded(policy: Path, where: Path, fallback: str, lost: bool = True) -> Path:
    """A copy of ``policy`` whose card says it lost (or not) to ``fallback``."""
    copy = shutil.copytree(policy, where)
    card = _card(copy)
    card["guard"] = {"fallback": fallback, "rule": "lost-on-test", "active": lost}
    card["warning"] = f"the policy loses to {fallback} on the test split" if lost else None
    write_card(copy, card)  # bound to the model again, as `train` writes it
    return copy


def test_a_guarded_policy_that_lost_replays_as_its_fallback(trained: tuple[Path, Path, str],
                                                            tmp_path: Path) -> None:
    from hpcpolicy.deploy.learned import LearnedPolicy
    from hpcpolicy.deploy.resolve import resolve_policy

    table, policy, _ = trained
    guarded = _guarded(policy, tmp_path / "guarded", "sjf")
    won = _guarded(policy, tmp_path / "won", "sjf", lost=False)
    assert resolve_policy(str(guarded)).name == "sjf"
    assert isinstance(resolve_policy(str(won)), LearnedPolicy)
    assert isinstance(resolve_policy(str(guarded), guard=False), LearnedPolicy)
    docs = {}
    for name, spec in (("guarded", guarded), ("sjf", "sjf"), ("won", won)):
        out = tmp_path / f"{name}.json"
        result = invoke("simulate", str(table), "-p", str(spec), "-b", "easy", "--windows", "3",
                        "--window-size", "40", "--json", str(out))
        assert result.exit_code == 0, result.output
        assert ("guard active" in " ".join(result.output.split())) == (name == "guarded")
        docs[name] = json.loads(out.read_text())
    assert docs["guarded"]["runs"][0]["summary"] == docs["sjf"]["runs"][0]["summary"]
    assert docs["won"]["runs"][0]["policy"] == str(won)  # an inactive guard: the policy itself


def test_a_damaged_card_is_one_line_naming_it(trained: tuple[Path, Path, str],
                                              tmp_path: Path) -> None:
    table, policy, _ = trained
    damaged = shutil.copytree(policy, tmp_path / "damaged")
    (damaged / "card.json").write_text("{")
    line = one_line_error(invoke("simulate", str(table), "-p", str(damaged)))
    assert f"{damaged / 'card.json'}:1:2: the model card is not valid JSON" in line


@pytest.mark.slow  # over the ten-minute budget of the default suite; run with -m slow
def test_whatif_shows_the_card_and_the_active_guard(trained: tuple[Path, Path, str],
                                                    tmp_path: Path) -> None:
    table, policy, _ = trained
    guarded = _guarded(policy, tmp_path / "guarded", "sjf")
    out = tmp_path / "rep"
    result = invoke("whatif", str(table), "-c", f"{guarded}+easy", "--bootstrap", "100",
                    "-o", str(out))
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "model card: test split, backfill easy" in text  # the card warns: shown
    assert "the policy loses to sjf on the test split" in text
    assert "guard active" in text and "sjf runs in its place" in text
    notes = json.loads((out / "report.json").read_text())["notes"]
    assert any("model card: test split" in n for n in notes)
    assert any("guard active" in n for n in notes)
    assert "need not hold on this one" not in text  # compared on the log it trained on

    other = write_table(tmp_path / "other.parquet", 300, seed=1)
    result = invoke("whatif", str(other), "-c", f"{guarded}+easy", "--bootstrap", "100",
                    "-o", str(tmp_path / "other-rep"))
    assert result.exit_code == 0, result.output
    assert ("that fallback was the best heuristic on the log it trained on, which need not "
            "hold on this one") in " ".join(result.output.split())

    won = _guarded(policy, tmp_path / "won", "sjf", lost=False)
    result = invoke("whatif", str(table), "-c", f"{won}+easy", "--bootstrap", "100",
                    "-o", str(tmp_path / "won-rep"))
    assert result.exit_code == 0, result.output
    notes = json.loads((tmp_path / "won-rep" / "report.json").read_text())["notes"]
    card_notes = [n for n in notes if "model card" in n or "guard" in n]
    assert len(card_notes) == 1 and card_notes[0].startswith(f"{won}+easy's model card: test")


def test_no_test_window_leaves_a_card_that_says_why(tmp_path: Path) -> None:
    table = write_table(tmp_path / "jobs.parquet", 300)
    config = tmp_path / "ppo.json"
    config.write_text(json.dumps(ROLLOUT))
    result = invoke("train", str(table), *TINY, "--train-frac", "0.9", "--config", str(config),
                    "-o", str(tmp_path / "run"))
    assert result.exit_code == 0, result.output
    card = _card(tmp_path / "run" / "policy")
    jsonschema.validate(card, schemas.load("model_card"))
    assert card["test"] is None and card["guard"] is None and card["validation"] is None
    assert card["skipped"].startswith("no guard: the validation part holds 30 jobs")
    assert "; the test part holds no window" in card["skipped"]
    assert "no test comparison: no guard:" in " ".join(result.output.split())


def test_the_guard_ignores_the_test_part(trained: tuple[Path, Path, str],
                                         tmp_path: Path) -> None:
    """Jobs of the test part changed: the test figures move, the validation and guard do not."""
    import polars as pl

    from hpcpolicy.training.card import build_card
    from hpcpolicy.training.options import TrainOptions

    table, policy, _ = trained
    jobs = pl.read_parquet(table)
    later = pl.int_range(pl.len()) >= 210
    changed = write_job_table(tmp_path / "jobs.parquet", jobs.with_columns(
        pl.when(later).then(pl.col(c) * 3).otherwise(pl.col(c)).alias(c)
        for c in ("run_time_s", "req_walltime_s")), [{"MaxProcs": CORES}])
    opts = TrainOptions(window_size=40, k=8, backfill="easy", val_frac=0.3)
    before, after = build_card(table, policy, opts), build_card(changed, policy, opts)
    assert before["validation"] == after["validation"] and before["guard"] == after["guard"]
    assert before["test"]["scores"] != after["test"]["scores"]


def test_a_quiet_validation_part_leaves_the_fallback_to_the_jobs_before_it(
        trained: tuple[Path, Path, str], tmp_path: Path) -> None:
    """Validation jobs (120..209) made one-second, one-core jobs: every heuristic scores 1 there,
    so the fallback is the best heuristic on the jobs before them (30..119), and the card says
    so."""
    import polars as pl

    from hpcpolicy.training.card import build_card
    from hpcpolicy.training.options import TrainOptions

    table, policy, _ = trained
    jobs = pl.read_parquet(table)
    quiet = pl.int_range(pl.len()).is_between(120, 209)
    changed = write_job_table(tmp_path / "jobs.parquet", jobs.with_columns(
        pl.when(quiet).then(value).otherwise(pl.col(c)).alias(c)
        for c, value in (("run_time_s", 1), ("req_walltime_s", 2), ("req_cpus", 1))),
        [{"MaxProcs": CORES}])
    opts = TrainOptions(window_size=40, k=8, backfill="easy", val_frac=0.3)
    card = build_card(changed, policy, opts)
    jsonschema.validate(card, schemas.load("model_card"))
    val = card["validation"]
    assert {s["mean_bsld"] for s in val["scores"]} == {1.0}
    earlier = val["fallback_chosen_on"]
    assert earlier["jobs"] == [30, 120] and all(30 <= s <= 80 for s in earlier["starts"])
    heuristics = {s["policy"]: s["mean_bsld"] for s in earlier["scores"]}
    assert card["guard"]["fallback"] == min(heuristics, key=heuristics.__getitem__)
    assert max(heuristics.values()) > 1.05 * min(heuristics.values())
    assert card["guard"]["active"]  # a tie on validation is no evidence for the policy
    assert (f"the fallback {card['guard']['fallback']} was chosen on the jobs before it "
            "(30..119)") in card["warning"]


def test_the_guard_note_says_which_part_decided(trained: tuple[Path, Path, str],
                                                tmp_path: Path) -> None:
    from hpcpolicy.deploy.guard import guard_note

    _, policy, _ = trained
    old = _guarded(policy, tmp_path / "old", "sjf")  # a version-1 card: decided on test
    new = shutil.copytree(old, tmp_path / "new")
    card = _card(new)
    card["guard"]["rule"] = "beats-best-on-validation"
    write_card(new, card)
    assert f"{old} lost to sjf on its test split" in (guard_note(str(old)) or "")
    assert f"{new} did not beat sjf on its validation part" in (guard_note(str(new)) or "")


def test_prior_auto_starts_from_the_best_heuristic_on_validation(tmp_path: Path) -> None:
    """``--prior auto`` picks the best heuristic a policy can start from on the validation
    windows, before training; the run says so, the manifest and card record it, and the
    briefly trained residual policy still scores exactly as that heuristic there."""
    from hpcpolicy.env.prior import PRIORS

    table = write_table(tmp_path / "jobs.parquet", 300)
    config = tmp_path / "ppo.json"
    config.write_text(json.dumps(ROLLOUT))
    result = invoke("train", str(table), *TINY, "--val-frac", "0.3", "--config", str(config),
                    "--prior", "AUTO", "-o", str(tmp_path / "run"))
    assert result.exit_code == 0, result.output
    policy = tmp_path / "run" / "policy"
    card = _card(policy)
    jsonschema.validate(card, schemas.load("model_card"))
    scores = {s["policy"]: s["mean_bsld"] for s in card["validation"]["scores"]}
    prior = card["prior"]
    assert prior in PRIORS and scores[prior] == min(scores[p] for p in PRIORS)
    assert scores[str(policy)] == scores[prior]
    manifest = json.loads((policy / "manifest.json").read_text())
    assert manifest["observation"]["slot_order"] == prior
    text = " ".join(result.output.split())  # as wrapped for the terminal
    assert f"starts from {prior} (--prior auto: best on validation)" in text
    assert f"starting from {prior} (--prior)" in text

    # the library's train resolves auto itself, with no hook: the same prior, and its card
    from hpcpolicy.training import Hooks, TrainOptions, TrainStart, train

    starts: list[TrainStart] = []
    trained = train(table, algo="ppo", config=ROLLOUT, out=tmp_path / "lib", hooks=Hooks(
        on_start=starts.append), options=TrainOptions(steps=128, num_envs=2, window_size=40,
                                                      k=8, seed=3, backfill="easy",
                                                      val_frac=0.3))
    assert f"starts from {prior} (--prior auto: best on validation)" in starts[0].description
    order = json.loads((tmp_path / "lib" / "policy" / "manifest.json").read_text())
    assert order["observation"]["slot_order"] == prior
    assert trained.card == _card(tmp_path / "lib" / "policy") and trained.card["prior"] == prior
