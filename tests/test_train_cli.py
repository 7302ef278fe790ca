"""``hpcpolicy train``: tiny runs end to end, resume, DD-PPO launch, and one-line errors."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest
import torch
from cli_helpers import invoke, one_line_error

pytest.importorskip("torch")
pytest.importorskip("gymnasium")
pytest.importorskip("onnxruntime")

from env_jobs import write_table

from hpcpolicy.atomic import file_sha256

TINY = ["--steps", "256", "--num-envs", "2", "--window-size", "40", "--k", "8", "--seed", "3"]


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_table(tmp_path_factory.mktemp("train") / "jobs.parquet", 300)


@pytest.fixture
def rollout64(tmp_path: Path) -> Path:
    path = tmp_path / "ppo.json"
    path.write_text(json.dumps({"num_steps": 32, "num_minibatches": 2, "update_epochs": 2,
                                "checkpoint_every": 2}))
    return path


def _metrics(run: Path) -> list[dict[str, str]]:
    with (run / "metrics.csv").open(newline="") as f:
        return [{k: v for k, v in row.items() if k not in ("wall_time_s", "sps")}
                for row in csv.DictReader(f)]


def test_ppo_run_writes_a_policy_that_evaluate_replays(table: Path, tmp_path: Path,
                                                       rollout64: Path) -> None:
    run = tmp_path / "run"
    result = invoke("train", str(table), *TINY, "-o", str(run), "--config", str(rollout64),
                    "--backfill", "easy")
    assert result.exit_code == 0, result.output
    assert "last bsld" in result.output and "last best heuristic" in result.output
    manifest = json.loads((run / "policy" / "manifest.json").read_text())
    assert manifest["reward"] == "bsld" and manifest["observation"]["k"] == 8
    assert manifest["training_data"] == {"path": str(table), "sha256": file_sha256(table)}
    assert manifest["provenance"]["split"]["jobs"] == [0, 180]  # 60 %: the next 10 % validate
    assert manifest["provenance"]["environment"]["backfill"] == "easy"
    env = json.loads((run / "env.json").read_text())
    assert env["factory"] == "hpcpolicy.env.factory:make_env"
    rows = _metrics(run)
    assert [r["global_step"] for r in rows] == ["64", "128", "192", "256"]
    assert {"env/bsld", "env/best_heuristic_bsld", "env/bsld_vs_best"} <= set(rows[0])
    assert any(r["env/bsld"] for r in rows)  # episodes of 40 jobs end within the budget
    assert {r["env/invalid_actions"] for r in rows} <= {"", "0"}  # masked slots never chosen

    out = tmp_path / "eval.json"
    result = invoke("evaluate", str(table), "--policy", f"sjf,{run / 'policy'}", "--backfill",
                    "easy", "--windows", "2", "--window-size", "40", "--json", str(out))
    assert result.exit_code == 0, result.output
    doc = json.loads(out.read_text())
    assert [r["kind"] for r in doc["runs"]] == ["heuristic", "learned"]
    assert doc["runs"][1]["bsld_vs_best_heuristic"] is not None

    sim = tmp_path / "sim.json"
    result = invoke("simulate", str(table), "-p", "sjf", "-p", str(run / "policy"), "-b", "easy",
                    "--walltime-fallback", "runtime", "--json", str(sim))
    assert result.exit_code == 0, result.output
    policies = [r["config"]["policy"] for r in json.loads(sim.read_text())["runs"]]
    assert policies == ["sjf", str(run / "policy")]


def test_resume_continues_to_the_uninterrupted_run(table: Path, tmp_path: Path) -> None:
    """A run stopped at 128 steps and resumed to 256 equals one run of 256 (the learning rate
    is constant here: annealing depends on the budget, which a stop at 128 changes)."""
    whole, part = tmp_path / "whole", tmp_path / "part"
    config = tmp_path / "ppo.json"
    config.write_text(json.dumps({"num_steps": 32, "num_minibatches": 2, "update_epochs": 2,
                                  "checkpoint_every": 1, "anneal_lr": False}))
    base = [*TINY[2:], "--config", str(config)]
    assert invoke("train", str(table), "--steps", "256", *base, "-o", str(whole)).exit_code == 0
    assert invoke("train", str(table), "--steps", "128", *base, "-o", str(part)).exit_code == 0
    resumed = invoke("train", str(table), "--steps", "256", *base, "-o", str(part), "--resume")
    assert resumed.exit_code == 0, resumed.output
    assert _metrics(part) == _metrics(whole)
    line = one_line_error(invoke("train", str(table), "--steps", "256", *base, "-o", str(part),
                                 "--resume", "--reward", "wait"))
    assert f"cannot resume {part} with a different environment (env.reward: 'bsld' -> " \
           "'wait'); give the options of the original run" in line
    line = one_line_error(invoke("train", str(table), *base, "-o", str(part)))
    assert "already holds a run" in line and "--resume" in line


def test_ddppo_hands_the_env_factory_to_the_workers(table: Path, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    from hpcpolicy.ppo import ddppo
    from hpcpolicy.ppo.ppo import TrainResult

    calls: list[dict[str, Any]] = []

    def fake_launch(cfg: Any, factory: str, run: Path, **kwargs: Any) -> TrainResult:
        calls.append({"cfg": cfg, "factory": factory, **kwargs})
        return TrainResult(Path(run), 0, 0, False, 0.0, {})

    monkeypatch.setattr(ddppo, "launch", fake_launch)
    result = invoke("-q", "train", str(table), "--algo", "ddppo", "--workers", "2", *TINY,
                    "-o", str(tmp_path / "dd"))
    assert result.exit_code == 0, result.output
    (call,) = calls
    assert call["workers"] == 2 and call["cfg"].algo == "ddppo" and not call["resume"]
    assert call["initial_policy"] is None
    assert call["provenance"]["reward"] == "bsld"
    module, _, name = call["factory"].partition(":")
    make_env = getattr(__import__(module, fromlist=[name]), name)
    env = make_env(**json.loads(json.dumps(call["env_kwargs"])))  # JSON-ready, as workers get it
    obs, info = env.reset(seed=0)
    assert obs["jobs"].shape == (8, 7) and info["window_start"] + 40 <= 180


def test_bad_options_are_one_line_errors(table: Path, tmp_path: Path) -> None:
    assert f"--algo cql learns from a replay dataset directory, and {table} is a file; build " \
           "one with `hpcpolicy dataset build" in one_line_error(
               invoke("train", str(table), "--algo", "cql"))
    assert "unknown --algo 'a2c'; valid: online ddppo, ppo (on a job table), offline cql, bcq, " \
           "bc, dqn (on a replay dataset)" in one_line_error(
               invoke("train", str(table), "--algo", "a2c"))
    assert "--workers 2 needs --algo ddppo" in one_line_error(
        invoke("train", str(table), "--workers", "2"))
    assert "--resume needs --out" in one_line_error(invoke("train", str(table), "--resume"))
    assert "reward 'slowdown': unknown term" in one_line_error(
        invoke("train", str(table), "--reward", "slowdown", "-o", str(tmp_path / "r")))
    assert "the train part holds 180 jobs" in one_line_error(
        invoke("train", str(table), "--window-size", "250", "-o", str(tmp_path / "r")))
    assert "(0.1 of the jobs kept for validation: --val-frac)" in one_line_error(
        invoke("train", str(table), "--window-size", "200", "-o", str(tmp_path / "r")))
    assert "val_frac must be in [0, train_frac=0.7), not 0.8" in one_line_error(
        invoke("train", str(table), "--val-frac", "0.8", "-o", str(tmp_path / "r")))
    assert "--prior 'fairshare' is not a heuristic a policy can start from; valid: none, " \
           "auto, fcfs" in one_line_error(
        invoke("train", str(table), "--prior", "fairshare", "-o", str(tmp_path / "r")))
    bad = tmp_path / "bad.json"
    bad.write_text('{"learning_rat": 0.1}')
    assert "unknown field(s) learning_rat" in one_line_error(
        invoke("train", str(table), "--config", str(bad), "-o", str(tmp_path / "r")))


def test_init_from_starts_the_policy_from_another_run(table: Path, tmp_path: Path,
                                                      rollout64: Path) -> None:
    from hpcpolicy.ppo.warm_start import policy_weights

    first = tmp_path / "first"
    result = invoke("-q", "train", str(table), *TINY, "-o", str(first), "--config",
                    str(rollout64))
    assert result.exit_code == 0, result.output
    still = tmp_path / "still.json"  # learning too slow to move the weights
    still.write_text(json.dumps({**json.loads(rollout64.read_text()), "learning_rate": 1e-12}))
    weights = {}
    for name, extra in (("from_first", ["--init-from", str(first / "policy")]), ("fresh", [])):
        run = tmp_path / name
        result = invoke("-q", "train", str(table), *TINY, "-o", str(run), "--config", str(still),
                        *extra)
        assert result.exit_code == 0, result.output
        weights[name] = policy_weights(run / "policy")
    trained = policy_weights(first / "policy")
    for key, value in trained.items():
        torch.testing.assert_close(weights["from_first"][key], value)
    assert any(not torch.allclose(weights["fresh"][key], value) for key, value in trained.items())
    manifest = json.loads((tmp_path / "from_first" / "policy" / "manifest.json").read_text())
    assert manifest["provenance"]["initialised_from"] == str((first / "policy").resolve())
    order = json.loads((first / "policy" / "manifest.json").read_text())["observation"]
    assert manifest["observation"]["slot_order"] == order["slot_order"]  # kept, not re-chosen
    other = "ljf" if order["slot_order"] != "ljf" else "sjf"
    assert (f"learned on slots in {order['slot_order']} order; --prior {other} would show it "
            "others") in one_line_error(invoke("train", str(table), *TINY, "--prior", other,
                                               "--init-from", str(first / "policy"),
                                               "-o", str(tmp_path / "o")))

    wide = tmp_path / "wide.json"
    wide.write_text(json.dumps({"hidden": [16, 8]}))
    assert ("its network is a job_scorer_mlp with hidden [32, 16, 8] and activation 'tanh'; "
            "this run's is hidden [16, 8]") in one_line_error(
        invoke("train", str(table), *TINY, "--config", str(wide), "--init-from",
               str(first / "policy"), "-o", str(tmp_path / "w")))
    assert "--algo bc does not take it" in one_line_error(
        invoke("train", str(table), "--algo", "bc", "--init-from", str(first / "policy")))
    assert "--resume continues from the run's checkpoint instead" in one_line_error(
        invoke("train", str(table), "--resume", "-o", str(first), "--init-from",
               str(first / "policy")))
    assert "no such policy file or directory" in one_line_error(
        invoke("train", str(table), *TINY, "--init-from", str(tmp_path / "nowhere"),
               "-o", str(tmp_path / "n")))


def test_site_puts_the_run_in_the_calibrated_world(table: Path, tmp_path: Path,
                                                   rollout64: Path) -> None:
    """`train --site`: the environment carries the site's limits, its capacity stretches the
    run times the episodes replay, env.json records the model, and offline runs refuse it."""
    from hpcpolicy.env.factory import load, make_env
    from hpcpolicy.world import SiteModel
    from hpcpolicy.world.site_toml import save_site

    site = tmp_path / "site.toml"
    save_site(SiteModel(availability=0.5, user_jobs=2), site)
    run = tmp_path / "run"
    result = invoke("-q", "train", str(table), *TINY, "-o", str(run), "--config",
                    str(rollout64), "--site", str(site))
    assert result.exit_code == 0, result.output
    kwargs = json.loads((run / "env.json").read_text())["kwargs"]
    assert kwargs["world"]["site"] == site.read_text()  # the model itself: workers read no file
    env = make_env(**kwargs).unwrapped
    plain, _ = load(str(table))
    assert env.config.user_jobs == 2
    assert (env.workload.run_time >= 2 * plain.run_time - 1).all()
    assert "--site" in one_line_error(
        invoke("train", str(tmp_path), "--algo", "bc", "--site", str(site)))


def test_a_log_where_the_heuristics_tie_stops_before_training(tmp_path: Path) -> None:
    """Issue 41 item 4: on a machine where no queue forms every heuristic scores the same on
    the validation part; train says so in one line, at once, and --force trains anyway."""
    import time

    table = write_table(tmp_path / "jobs.parquet", 600)  # validation: 60 jobs, a window
    run = tmp_path / "run"
    tic = time.perf_counter()
    line = one_line_error(invoke("train", str(table), *TINY, "--procs", "100000",
                                 "-o", str(run)))
    assert time.perf_counter() - tic < 30
    assert "no queue forms" in line and "nothing to learn" in line, line
    for fix in ("--window-size", "--procs", "period", "--force"):
        assert fix in line, (fix, line)
    assert not run.exists()
    result = invoke("train", str(table), *TINY, "--procs", "100000", "--force", "-o", str(run))
    assert result.exit_code == 0, result.output
    assert "nan" not in result.output


def test_progress_says_no_episode_ended_instead_of_nan() -> None:
    """Issue 41 item 4: an update in which no episode ended has no return; the progress line
    (and the DD-PPO workers' log) says so instead of printing nan."""
    import math

    from hpcpolicy.commands._train_show import _format
    from hpcpolicy.ppo.ppo import progress_words

    quiet = {"charts/episodes": 0.0, "charts/episodic_return": math.nan, "env/bsld": math.nan,
             "env/best_heuristic_bsld": math.nan, "env/bsld_vs_best": math.nan}
    ended = {**quiet, "charts/episodes": 2.0, "charts/episodic_return": -1.0,
             "env/bsld": 1.5, "env/best_heuristic_bsld": 1.2, "env/bsld_vs_best": 1.25}
    for text in (_format(quiet), progress_words(quiet)):
        assert "nan" not in text and "no episode ended" in text, text
    assert _format(ended) == "return -1  bsld 1.50  best heuristic 1.20  vs best +25.0%"
    assert progress_words(ended) == "return -1"
