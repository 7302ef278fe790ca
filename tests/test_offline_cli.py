"""``hpcpolicy dataset build|inspect`` and ``hpcpolicy train DATASET --algo ...``."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_helpers import invoke, one_line_error

pytest.importorskip("d3rlpy")
pytest.importorskip("onnxruntime")

from offline_jobs import write_logged_table

SMALL = ["--k", "8", "--window-size", "40", "--heuristics", "fcfs", "--seed", "2"]


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_logged_table(tmp_path_factory.mktemp("offline-cli") / "jobs.parquet", 300)


def test_build_inspect_train_and_finetune(table: Path, tmp_path: Path) -> None:
    data = tmp_path / "data"
    result = invoke("dataset", "build", str(table), "--source", "mix", *SMALL, "-o", str(data))
    assert result.exit_code == 0, result.output
    shown = invoke("dataset", "inspect", str(data))
    assert shown.exit_code == 0, shown.output
    text = " ".join(shown.output.split())
    assert "source mix (logged, fcfs, fcfs+eps, random)" in text
    assert "logged starts inside the 8 visible slots" in text
    run = tmp_path / "run"
    result = invoke("train", str(data), "--algo", "bc", "--steps", "40", "--online-finetune",
                    "--finetune-steps", "128", "-o", str(run))
    assert result.exit_code == 0, result.output
    assert (run / "policy" / "manifest.json").is_file()
    assert (run / "finetune" / "policy" / "manifest.json").is_file()
    assert "fine-tuned with PPO (" in " ".join(result.output.split())
    evaluated = invoke("evaluate", str(table), "--policy", f"fcfs,{run / 'policy'}",
                       "--backfill", "easy", "--windows", "2", "--window-size", "40")
    assert evaluated.exit_code == 0, evaluated.output


def test_bad_input_is_one_clear_line(table: Path, tmp_path: Path) -> None:
    data = tmp_path / "data"
    assert invoke("-q", "dataset", "build", str(table), "--source", "logged", *SMALL,
                  "--logged-action", "head", "-o", str(data)).exit_code == 0
    assert "decisions reserve the oldest job" in " ".join(
        invoke("dataset", "inspect", str(data)).output.split())
    assert "logged_action 'first' is not one of started, head" in \
        one_line_error(invoke("dataset", "build", str(table), "--logged-action", "first",
                              "-o", str(tmp_path / "y")))
    assert "already holds a dataset; choose another -o or add --overwrite" in one_line_error(
        invoke("dataset", "build", str(table), *SMALL, "-o", str(data)))
    assert "source 'log' is not one of logged, heuristics, random, mix" in \
        one_line_error(invoke("dataset", "build", str(table), "--source", "log", "-o",
                              str(tmp_path / "x")))
    assert "unknown --algo 'sac'; valid: online ddppo, ppo (on a job table), offline cql, " \
           "bcq, bc, dqn (on a replay dataset)" in one_line_error(
               invoke("train", str(data), "--algo", "sac"))
    assert f"--k 16: the dataset {data} was built with K = 8" in one_line_error(
        invoke("train", str(data), "--algo", "cql", "--k", "16", "-o", str(tmp_path / "r")))
    assert f"{data} is a directory (a replay dataset?); --algo ppo trains in the simulator" in \
        one_line_error(invoke("train", str(data), "--algo", "ppo"))
    assert "--backfill: online options" in one_line_error(
        invoke("train", str(data), "--algo", "bc", "--backfill", "easy"))
    assert "no manifest.json" in one_line_error(
        invoke("train", str(tmp_path), "--algo", "bc", "-o", str(tmp_path / "r")))
    empty = tmp_path / "empty"
    assert invoke("-q", "dataset", "build", str(table), "--source", "random", *SMALL,
                  "--val-frac", "0", "-o", str(empty)).exit_code == 0
    (empty / "train.h5").unlink()
    assert "train.h5: missing; the dataset is incomplete, rebuild it" in one_line_error(
        invoke("train", str(empty), "--algo", "dqn", "-o", str(tmp_path / "r2")))
