"""Ray, the ``cluster`` extra: a one-line error without it, and a tune and a sweep on a
two-node Ray cluster (a head and a worker on 127.0.0.1), one of whose trial processes is
killed mid-run."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import invoke, one_line_error
from env_jobs import write_table

HPCPOLICY = str(Path(sys.executable).with_name("hpcpolicy"))
# 2 members x 3 rounds of 2 updates of 64 steps, scored on 3 windows of 40 validation jobs
TINY = ["--population", "2", "--steps", "384", "--interval", "128", "--num-envs", "2",
        "--window-size", "40", "--k", "8", "--val-windows", "3", "--seed", "3"]
ROLLOUT = {"num_steps": 32, "num_minibatches": 2, "update_epochs": 2, "checkpoint_every": 1}


def test_backend_ray_without_ray_is_one_line_naming_the_extra(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` fails, as without the extra
    table = write_table(tmp_path / "jobs.parquet", 300)
    line = one_line_error(invoke("tune", str(table), "--backend", "ray", "-o",
                                 str(tmp_path / "t")))
    assert line == "error: --backend ray needs Ray, which is not installed: " \
                   "pip install 'hpcpolicy[cluster]'"
    spec = tmp_path / "grid.toml"
    spec.write_text(f'logs = ["{table.name}"]\ncandidates = ["sjf+easy"]\n')
    assert "pip install 'hpcpolicy[cluster]'" in one_line_error(
        invoke("sweep", str(spec), "--backend", "ray", "-o", str(tmp_path / "s")))
    assert "--ray-address 1.2.3.4:6379 needs --backend ray" in one_line_error(
        invoke("sweep", str(spec), "--ray-address", "1.2.3.4:6379"))
    assert "--backend 'spark': choose local or ray" in one_line_error(
        invoke("tune", str(table), "--backend", "spark"))
    assert not (tmp_path / "t").exists() and not (tmp_path / "s").exists()


def test_a_tune_resumes_only_with_the_backend_it_ran_with(tmp_path: Path) -> None:
    from hpcpolicy.tune.record import TunePaths, TuneRecord

    table = write_table(tmp_path / "jobs.parquet", 300)
    out = tmp_path / "t"
    TuneRecord(config={}, base={}, env={}, data={}, validation={}, baselines={},
               members=[]).save(TunePaths(out))
    (out / "ray").mkdir()
    line = one_line_error(invoke("tune", str(table), "--resume", "-o", str(out)))
    assert line == f"error: the tune in {out} ran with --backend ray; resume it with that backend"


def _wait(condition: Any, timeout: float, what: str) -> None:
    end = time.time() + timeout
    while not condition():
        assert time.time() < end, f"timed out waiting for {what}"
        time.sleep(0.5)


def _rounds(out: Path) -> int:
    try:
        return len(json.loads((out / "tune.json").read_text())["rounds"])
    except (OSError, ValueError):
        return 0


def _training_trials(env: dict[str, str]) -> list[int]:
    """Processes of this cluster (they hold its token path) running a trial's training."""
    mark = f"RAY_AUTH_TOKEN_PATH={env['RAY_AUTH_TOKEN_PATH']}".encode()
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if (proc / "cmdline").read_bytes().startswith(b"ray::ImplicitFunc.train") \
                    and mark in (proc / "environ").read_bytes().split(b"\0"):
                found.append(int(proc.name))
        except (OSError, ValueError):
            continue
    return found


def test_tune_and_sweep_on_a_two_node_ray_cluster(ray_module: object, tmp_path: Path) -> None:
    """About 30 s on 2 busy cores: 10 to start the two nodes, 15 for the tune, 5 for the
    sweep."""
    from ray_cluster import two_node_cluster

    table = write_table(tmp_path / "jobs.parquet", 300)
    (tmp_path / "ppo.json").write_text(json.dumps(ROLLOUT))
    spec = tmp_path / "grid.toml"
    spec.write_text(f'logs = ["{table.name}"]\ncandidates = ["sjf+easy", "f1+easy"]\n'
                    'bootstrap = 100\nperiod_s = 86400\n')
    out = tmp_path / "tune"
    with two_node_cluster() as (address, env):
        driver = subprocess.Popen(
            [HPCPOLICY, "tune", str(table), *TINY, "--config", str(tmp_path / "ppo.json"),
             "-o", str(out), "--backend", "ray", "--ray-address", address],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        try:
            _wait(lambda: _rounds(out) >= 1 or driver.poll() is not None, 180, "round 1")
            _wait(lambda: _training_trials(env) or driver.poll() is not None, 60, "round 2")
            os.kill(_training_trials(env)[0], signal.SIGKILL)  # a member in round 2
            output = driver.communicate(timeout=300)[0].decode()
        finally:
            driver.kill()
        assert driver.returncode == 0, output
        swept = subprocess.run([HPCPOLICY, "sweep", str(spec), "-o", str(tmp_path / "sw"),
                                "--backend", "ray", "--ray-address", address],
                               env=env, capture_output=True, text=True, timeout=300)
    assert swept.returncode == 0, swept.stdout + swept.stderr

    record = json.loads((out / "tune.json").read_text())
    assert record["status"] == "done" and len(record["rounds"]) == 3
    assert all(s is not None for r in record["rounds"] for s in r["scores"].values())
    assert (out / "policy" / "manifest.json").is_file()
    state = max((out / "ray" / "s0").glob("experiment_state-*.json"))
    trials = json.loads(state.read_text())["trial_data"]  # (trial, its run metadata)
    assert sum(json.loads(meta)["num_failures"] for _, meta in trials) == 1  # Ray retried it
    assert len(list((out / "ray" / "s0").glob("*/error.txt"))) == 1

    rows = (tmp_path / "sw" / "sweep.md").read_text().splitlines()[4:]
    assert [r.split(" | ")[1] for r in rows] == ["sjf+easy", "f1+easy"]
    assert all((tmp_path / "sw" / "jobs" / c / "as-logged" / "seed0" / "report.html").is_file()
               for c in ("sjf+easy", "f1+easy"))


class _Trial:
    """What the recorder reads of a Ray trial: its config."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config


def test_the_ray_recorder_writes_rounds_as_the_serial_loop_does(ray_module: object,
                                                                tmp_path: Path) -> None:
    from hpcpolicy.tune.on_ray import _Recorder
    from hpcpolicy.tune.record import TunePaths, TuneRecord

    first = {"learning_rate": 3e-4, "ent_coef": 0.01, "clip_coef": 0.2}
    faster = {**first, "learning_rate": 4e-4}
    paths = TunePaths(tmp_path)
    TuneRecord(config={"total_steps": 256, "interval": 128}, base={}, env={}, data={},
               validation={}, baselines={}, members=[
                   {"name": "m0", "seed": 1, "hyperparameters": first},
                   {"name": "m1", "seed": 2, "hyperparameters": first}]).save(paths)
    recorder = _Recorder(tmp_path, 2)
    trials = [_Trial({"member": "m0", "exploit": None}), _Trial({"member": "m1",
                                                                 "exploit": None})]

    def report(member: int, round_: int, score: float) -> TuneRecord:
        result = {"member": f"m{member}", "round": round_, "val_bsld": score,
                  "steps": 128 * round_, "trained_with": trials[member].config.get("hp", first)}
        recorder.on_trial_result(0, trials, trials[member], result)
        return TuneRecord.load(paths)

    assert report(1, 1, 9.0).trained == ["m1"] and not TuneRecord.load(paths).rounds
    # m0 reports and ranks best; PBT (before the callback) makes m1 copy it
    trials[1].config = {"member": "m1", "hp": faster, "exploit": {
        "round": 1, "member": "m1", "copied": "m0", "member_score": 9.0, "source_score": 5.0,
        "before": first, "after": faster}}
    record = report(0, 1, 5.0)
    (round1,) = record.rounds
    assert round1["ranking"] == ["m0", "m1"] and round1["scores"] == {"m0": 5.0, "m1": 9.0}
    assert [(e["member"], e["copied"]) for e in round1["exploits"]] == [("m1", "m0")]
    assert record.members[1]["hyperparameters"] == faster and record.trained == []
    report(0, 2, 4.0)
    record = report(1, 2, math.inf)  # a member with no finite score ranks last
    assert record.rounds[1]["scores"] == {"m0": 4.0, "m1": None}
    assert record.rounds[1]["hyperparameters"]["m1"] == faster
    assert (tmp_path / "tune.csv").read_text().splitlines()[2].endswith(",m0")
