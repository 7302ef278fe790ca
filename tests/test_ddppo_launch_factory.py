"""A run folder is data: its ``launch.json`` cannot make DD-PPO workers run code of its choosing.

The workers build only hpcpolicy's own environment factories from ``launch.json``; any other
must be named on the workers' command line by whoever starts them (issue 28, item 7).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("gymnasium")

from env_jobs import write_table

from hpcpolicy.env import EnvConfig
from hpcpolicy.env.factory import ENV_FACTORY, env_kwargs
from hpcpolicy.errors import ConfigError
from hpcpolicy.ppo.config import DDPPOConfig
from hpcpolicy.ppo.ddppo import LAUNCH_FILE, prepare_launch, torchrun_command

CFG = DDPPOConfig(total_steps=128, num_envs=2, num_steps=32, num_minibatches=2,
                  update_epochs=1, checkpoint_every=1, seed=3)


def _hostile_launch(run: Path, marker: Path) -> None:
    """A launch.json whose factory is ``subprocess:run``, told to write ``marker``."""
    run.mkdir(parents=True)
    (run / LAUNCH_FILE).write_text(json.dumps({
        "config": CFG.to_dict(), "env_factory": "subprocess:run",
        "env_kwargs": {"args": f"id > {marker}", "shell": True}, "provenance": {},
        "initial_policy": None}))


def test_a_worker_refuses_a_foreign_factory_before_joining_the_group(tmp_path: Path) -> None:
    from hpcpolicy.ppo.ddppo import worker_main

    run, marker = tmp_path / "run", tmp_path / "ran"
    _hostile_launch(run, marker)
    with pytest.raises(ConfigError, match=r"env_factory 'subprocess:run' is not an environment "
                                          r"factory of hpcpolicy"):
        worker_main(run, resume=True)
    assert not marker.exists()


def test_torchrun_on_a_hostile_run_folder_runs_nothing(tmp_path: Path) -> None:
    run, marker = tmp_path / "run", tmp_path / "ran"
    _hostile_launch(run, marker)
    done = subprocess.run(torchrun_command("hpcpolicy.ppo.ddppo", run, 1, resume=False),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode != 0 and not marker.exists()
    errors = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "'subprocess:run'" in errors[0], done.stderr
    assert "--env-factory" in errors[0]  # says how to name a factory of one's own


@pytest.mark.slow  # two torchrun starts and a training run: benchmarks' time, not the suite's
def test_the_readme_recipe_trains_on_the_project_factory(tmp_path: Path) -> None:
    """README "Several machines": prepare_launch with make_env, then torchrun -m
    hpcpolicy.ppo.ddppo RUN (here one node, one worker), then --resume."""
    table = write_table(tmp_path / "jobs.parquet", 300)
    run = tmp_path / "run"
    prepare_launch(CFG, ENV_FACTORY, run,
                   env_kwargs=env_kwargs(table, EnvConfig(k=8, window_size=40)))
    for resume in (False, True):
        done = subprocess.run(torchrun_command("hpcpolicy.ppo.ddppo", run, 1, resume=resume),
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
    assert json.loads((run / "result.json").read_text())["global_step"] == 128
    assert (run / "policy" / "manifest.json").is_file()


@pytest.mark.slow
def test_a_factory_named_on_the_command_line_is_trusted(tmp_path: Path) -> None:
    """``launch`` names its factory on the workers' command line, so code that calls it may
    train on a factory of its own (the tests' toy environment)."""
    from hpcpolicy.ppo.ddppo import worker_main

    run = tmp_path / "run"
    prepare_launch(CFG, "benchmarks.builders.rl_toy_env:make_toy_env", run)
    with pytest.raises(ConfigError, match="not an environment factory of hpcpolicy"):
        worker_main(run)
    command = torchrun_command("hpcpolicy.ppo.ddppo", run, 1, resume=False,
                               env_factory="benchmarks.builders.rl_toy_env:make_toy_env")
    assert command[-2:] == ["--env-factory", "benchmarks.builders.rl_toy_env:make_toy_env"]
    root = str(Path(__file__).resolve().parent.parent)
    done = subprocess.run(command, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": root})
    assert done.returncode == 0, done.stderr
