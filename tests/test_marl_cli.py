"""``hpcpolicy train --algo marl``: a run, its resumption, DD-PPO workers, the artifact in
``evaluate``, and one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("torch")

from cli_helpers import invoke, one_line_error
from marl_case import write_case

from hpcpolicy.learn.runs import load_checkpoint

FAST = {"num_steps": 150, "update_epochs": 1, "checkpoint_every": 1}


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    folder = tmp_path_factory.mktemp("marlcli")
    table, spec = write_case(folder)
    config = folder / "marl.json"
    config.write_text(json.dumps(FAST), encoding="utf-8")
    return table, spec, config


def _train(files: tuple[Path, Path, Path], run: Path, *extra: str) -> list[str]:
    table, spec, config = files
    return ["train", str(table), "--algo", "marl", "--cluster", str(spec), "--config",
            str(config), "--window-size", "40", "--k", "8", "-o", str(run), *extra]


def test_train_then_resume_then_evaluate(files: tuple[Path, Path, Path], tmp_path: Path) -> None:
    run = tmp_path / "run"
    result = invoke(*_train(files, run, "--steps", "150", "--visible", "fitting"))
    assert result.exit_code == 0, result.output
    assert "policy: " in result.output and "--gpu-baselines" in result.output
    assert json.loads((run / "env.json").read_text())["factory"] == "hpcpolicy.marl"
    manifest = json.loads((run / "policy" / "manifest.json").read_text())
    assert manifest["agents"]["selector"]["visible"] == "fitting"
    result = invoke(*_train(files, run, "--steps", "300", "--resume", "--visible", "fitting"))
    assert result.exit_code == 0, result.output
    assert load_checkpoint(run / "checkpoints" / "last.pt")["counters"]["update"] == 2
    line = one_line_error(invoke(*_train(files, run, "--steps", "300", "--resume",
                                         "--window-size", "30")))
    assert "cannot resume" in line and "env.window_size: 40 -> 30" in line
    table, spec, _ = files
    out = tmp_path / "e.json"
    result = invoke("evaluate", str(table), "--cluster", str(spec), "--gpu-baselines",
                    "-p", str(run / "policy"), "--windows", "2", "--window-size", "40",
                    "--json", str(out))
    assert result.exit_code == 0, result.output
    runs = {(r["policy"], r["allocator"]): r for r in json.loads(out.read_text())["runs"]}
    assert len(runs) == 10 and runs[(str(run / "policy"), "learned")]["kind"] == "learned"


@pytest.mark.slow  # over the ten-minute budget of the default suite; run with -m slow
def test_two_workers_keep_identical_parameters(files: tuple[Path, Path, Path],
                                               tmp_path: Path) -> None:
    table, spec, _ = files
    config = tmp_path / "dd.json"
    config.write_text(json.dumps({**FAST, "sync_check_every": 1}), encoding="utf-8")
    run = tmp_path / "run"
    result = invoke("train", str(table), "--algo", "marl", "--cluster", str(spec),
                    "--config", str(config), "--window-size", "40", "--k", "8",
                    "--workers", "2", "--steps", "300", "-o", str(run))
    assert result.exit_code == 0, result.output
    ckpt = load_checkpoint(run / "checkpoints" / "last.pt")
    assert len(ckpt["workers"]) == 2 and ckpt["counters"]["update"] == 1
    rows = (run / "metrics.csv").read_text().splitlines()
    header, last = rows[0].split(","), rows[-1].split(",")
    assert float(last[header.index("sync/param_max_diff")]) == 0.0
    assert (run / "policy" / "allocator" / "policy.onnx").is_file()


@pytest.mark.parametrize(("extra", "message"), [
    (("--procs", "64"), "has no GPUs"),
    (("--reward", "wait"), "--reward: not an option of --algo marl"),
    (("--split", "test"), "--split test"),
    (("--resume",), "was not written by `hpcpolicy train`"),
    (("--visible", "newest"), "visible 'newest' is not one of oldest, fitting"),
])
def test_one_line_errors(files: tuple[Path, Path, Path], tmp_path: Path, extra: tuple[str, ...],
                         message: str) -> None:
    args = _train(files, tmp_path / "run", *extra)
    if "--procs" in extra:
        at = args.index("--cluster")
        del args[at:at + 2]
    assert message in one_line_error(invoke(*args))


def test_visible_is_refused_outside_marl(files: tuple[Path, Path, Path], tmp_path: Path) -> None:
    table, _, _ = files
    line = one_line_error(invoke("train", str(table), "--algo", "ppo", "--visible", "fitting",
                                 "-o", str(tmp_path / "run")))
    assert "--visible chooses the jobs the two-agent selector sees" in line


def test_a_missing_table_is_one_line(tmp_path: Path) -> None:
    line = one_line_error(invoke("train", str(tmp_path / "nope.parquet"), "--algo", "marl"))
    assert "no such job table" in line
