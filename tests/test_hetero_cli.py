"""``hpcpolicy train TABLE --algo dqn --cluster SPEC``: a run end to end, and one-line errors."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_helpers import invoke, one_line_error

from benchmarks.builders.gpu_jobs import GPU_PARTITION, write_gpu_table


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_gpu_table(tmp_path_factory.mktemp("hetero") / "gpu.parquet", n=200)


def test_train_then_simulate(table: Path, tmp_path: Path) -> None:
    config = tmp_path / "c.json"
    config.write_text('{"update_start": 20, "epsilon_steps": 50, "hidden": [8]}')
    run = tmp_path / "run"
    result = invoke("train", str(table), "--algo", "dqn", "--cluster", str(GPU_PARTITION),
                    "--steps", "120", "--window-size", "50", "--lambda", "0.5", "--config",
                    str(config), "-o", str(run))
    assert result.exit_code == 0, result.output
    assert "lambda 0.5" in result.output and f"policy: {run / 'policy'}" in result.output
    assert '"idle_weight": 0.5' in (run / "config.json").read_text()
    sim = invoke("simulate", str(table), "--policy", str(run / "policy"), "--cluster",
                 str(GPU_PARTITION), "--check")
    assert sim.exit_code == 0, sim.output
    assert "invariants checked: no violation" in sim.output


def test_errors_are_one_clear_line(table: Path, tmp_path: Path) -> None:
    one_type = tmp_path / "one.toml"
    one_type.write_text('name = "one"\n[[groups]]\nname = "g"\ncount = 4\ncores = 32\n'
                        'gpus = 4\ngpu_type = "a100"\n')
    assert "has 1 GPU type(s) ['a100']; assigning jobs to GPU types needs at least 2" in \
        one_line_error(invoke("train", str(table), "--algo", "dqn", "--cluster", str(one_type),
                              "-o", str(tmp_path / "r1")))
    assert "--algo dqn on a job table learns which GPU type each job starts on; give " \
           "--cluster with at least 2 GPU types" in one_line_error(
               invoke("train", str(table), "--algo", "dqn", "-o", str(tmp_path / "r2")))
    assert "--workers: not an option of --algo dqn on a job table" in one_line_error(
        invoke("train", str(table), "--algo", "dqn", "--cluster", str(GPU_PARTITION),
               "--workers", "2"))
    assert "--lambda weighs idle GPU time for --algo dqn on a job table" in one_line_error(
        invoke("train", str(table), "--algo", "ppo", "--lambda", "2"))
    assert "config field `idle_weight`: lambda must be >= 0, got -1.0" in one_line_error(
        invoke("train", str(table), "--algo", "dqn", "--cluster", str(GPU_PARTITION),
               "--lambda", "-1"))
    # A directory is still a replay dataset for offline DQN.
    assert "no manifest.json" in one_line_error(
        invoke("train", str(tmp_path), "--algo", "dqn", "-o", str(tmp_path / "r3")))
