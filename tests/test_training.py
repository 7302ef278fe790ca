"""``hpcpolicy.train``, the library's one training entry point: the same run as the command,
its start and progress reports, and the options each route refuses."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest
from cli_helpers import invoke

pytest.importorskip("torch")
pytest.importorskip("gymnasium")

from env_jobs import write_table

import hpcpolicy
from hpcpolicy.errors import ConfigError
from hpcpolicy.training import Hooks, TrainOptions, TrainProgress, TrainStart
from hpcpolicy.training.hooks import CARD_PHASE

TINY = TrainOptions(steps=128, num_envs=2, window_size=40, k=8, seed=3, backfill="easy")
ROLLOUT = {"num_steps": 32, "num_minibatches": 2, "update_epochs": 1, "checkpoint_every": 2}


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_table(tmp_path_factory.mktemp("training") / "jobs.parquet", 300)


def _metrics(run: Path) -> list[dict[str, str]]:
    with (run / "metrics.csv").open(newline="") as f:
        return [{k: v for k, v in row.items() if k not in ("wall_time_s", "sps")}
                for row in csv.DictReader(f)]


def test_import_hpcpolicy_stays_light_and_names_train() -> None:
    code = ("import sys, hpcpolicy; f = hpcpolicy.train; o = hpcpolicy.TrainOptions; "
            "print(f.__module__, 'torch' in sys.modules, 'polars' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["hpcpolicy.training.api", "False", "False"]
    with pytest.raises(AttributeError, match="no attribute 'trian'"):
        hpcpolicy.trian  # noqa: B018


def test_the_library_run_is_the_command_run(table: Path, tmp_path: Path) -> None:
    starts: list[TrainStart] = []
    reports: list[TrainProgress] = []
    trained = hpcpolicy.train(table, algo="ppo", config=ROLLOUT, out=tmp_path / "lib",
                              options=TINY, hooks=Hooks(on_start=starts.append,
                                                        progress=reports.append))
    assert trained.route == "online" and trained.algo == "ppo"
    assert trained.policy == tmp_path / "lib" / "policy"
    assert (trained.policy / "manifest.json").is_file()
    assert trained.result.global_step == 128 and not trained.result.interrupted
    assert trained.evaluate == (f"hpcpolicy evaluate {table} --policy fcfs,sjf,f1,wfp3,unicep,"
                                f"{trained.policy} --backfill easy")
    (start,) = starts
    assert start.run == tmp_path / "lib" and start.resumable
    assert start.description.startswith(f"{table}: 300 jobs; episodes from jobs 0..179 (train; "
                                         "180..209 validate)")
    training = [r for r in reports if r.phase == "training"]
    assert [(r.phase, r.done, r.total) for r in training] == [("training", 64, 128),
                                                              ("training", 128, 128)]
    assert training[-1].row is not None and "charts/episodic_return" in training[-1].row
    # then the model card replays its windows, reported under a phase of its own
    assert reports[:2] == training and {r.phase for r in reports[2:]} == {CARD_PHASE}

    config = tmp_path / "ppo.json"
    config.write_text(json.dumps(ROLLOUT))
    result = invoke("-q", "train", str(table), "--steps", "128", "--num-envs", "2",
                    "--window-size", "40", "--k", "8", "--seed", "3", "--backfill", "easy",
                    "--config", str(config), "-o", str(tmp_path / "cli"))
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == str(tmp_path / "cli" / "policy")
    assert _metrics(tmp_path / "lib") == _metrics(tmp_path / "cli")
    env = [json.loads((tmp_path / run / "env.json").read_text()) for run in ("lib", "cli")]
    assert env[0] == env[1] and env[0]["kwargs"]["env"]["backfill"] == "easy"


@pytest.mark.parametrize(("algo", "options", "message"), [
    ("marl", TrainOptions(reward="wait", warm=True),
     "--reward, --warm: not an option of --algo marl"),
    ("dqn", TrainOptions(workers=2, k=8),
     "--workers, --k: not an option of --algo dqn on a job table"),
    ("ppo", TrainOptions(finetune_steps=1000), "--online-finetune continues an offline run"),
    ("ppo", TrainOptions(idle_weight=0.5), "--lambda weighs idle GPU time"),
    ("ppo", TrainOptions(resume=True), "--resume needs --out"),
    ("cql", TrainOptions(), "--algo cql learns from a replay dataset directory"),
])
def test_each_route_refuses_what_it_does_not_take(table: Path, algo: str,
                                                  options: TrainOptions, message: str) -> None:
    with pytest.raises(ConfigError, match="^" + message.replace("(", r"\(")):
        hpcpolicy.train(table, algo=algo, options=options)


def test_an_option_at_its_default_counts_as_not_given() -> None:
    assert TrainOptions(reward="bsld", backfill="none").given(("reward", "backfill")) == []
    assert TrainOptions(idle_weight=1.0, finetune_steps=10).given(
        ("idle_weight", "finetune_steps", "k")) == ["--lambda", "--online-finetune"]


def test_a_missing_input_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    with pytest.raises(ConfigError, match="nowhere: no such file or directory"):
        hpcpolicy.train(missing, algo="bc")
