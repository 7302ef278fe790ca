"""``hpcpolicy.train(...)`` from Python leaves the policy folder ``hpcpolicy train`` leaves: the
deployed policy, its snapshots, the model card and its guard.

With the same seed the models are the same bytes. What differs, and why:

* each manifest's ``created_utc`` (the clock at export), ``package.git_commit`` (the
  checkout's HEAD then: others commit between two runs) and the trainer's timings
  (``wall_time_s``, ``sps``);
* the card names the policy folder it describes (its test comparison's ``evaluate`` command and
  the policy's row), which is each run's own path;
* so the card's ``binding`` hashes of the manifest and of the card differ too; the model's
  hash does not.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import invoke
from env_jobs import write_table

pytest.importorskip("torch")
pytest.importorskip("gymnasium")

import hpcpolicy
from hpcpolicy.training import TrainOptions

ROLLOUT = {"num_steps": 32, "num_minibatches": 2, "update_epochs": 1, "checkpoint_every": 2}
OPTIONS = TrainOptions(steps=128, num_envs=2, window_size=40, k=8, seed=3, backfill="easy",
                       val_frac=0.3)
"""Validation windows (jobs 120..209) for the prior, the snapshots and the guard, and one
snapshot after each of the two updates."""
FLAGS = ("--steps", "128", "--num-envs", "2", "--window-size", "40", "--k", "8", "--seed", "3",
         "--backfill", "easy", "--val-frac", "0.3")
"""``OPTIONS`` as the command's flags."""
PER_RUN = {"created_utc", "git_commit", "wall_time_s", "sps"}
"""Manifest fields that record when and how fast a run went, not what it learned."""


def _folder(run: Path) -> dict[str, Any]:
    """The run's policy folder and snapshots, file by file: JSON parsed with the per-run
    fields dropped and the run's path written ``RUN``, the models as bytes."""
    def json_of(path: Path) -> Any:
        def scrub(value: Any) -> Any:
            if isinstance(value, dict):
                return {k: scrub(v) for k, v in value.items() if k not in PER_RUN}
            if isinstance(value, list):
                return [scrub(v) for v in value]
            return value.replace(str(run), "RUN") if isinstance(value, str) else value
        doc = scrub(json.loads(path.read_text()))
        if path.name == "card.json":
            doc["binding"] = doc["binding"]["model_sha256"]  # the rest hashes per-run text
        return doc

    files = sorted(p for folder in ("policy", "snapshots") for p in (run / folder).rglob("*")
                   if p.is_file())
    return {str(p.relative_to(run)): json_of(p) if p.suffix == ".json" else p.read_bytes()
            for p in files}


def test_the_library_leaves_the_policy_folder_the_command_leaves(tmp_path: Path) -> None:
    table = write_table(tmp_path / "jobs.parquet", 300)
    trained = hpcpolicy.train(table, algo="ppo", config=ROLLOUT, out=tmp_path / "lib",
                              options=OPTIONS)
    config = tmp_path / "ppo.json"
    config.write_text(json.dumps(ROLLOUT))
    result = invoke("-q", "train", str(table), *FLAGS, "--config", str(config), "-o",
                    str(tmp_path / "cli"))
    assert result.exit_code == 0, result.output

    lib, cli = _folder(tmp_path / "lib"), _folder(tmp_path / "cli")
    assert sorted(lib) == sorted(cli)
    assert {"policy/card.json", "policy/policy.onnx",
            "snapshots/update_000002/policy.onnx"} <= set(lib)
    assert lib == cli
    card = lib["policy/card.json"]
    assert card["prior"] is not None and card["guard"] is not None  # auto, decided on validation
    assert card["selection"]["candidates"] and card["test"] is not None
    assert trained.card == json.loads((trained.policy / "card.json").read_text())


@pytest.mark.parametrize("algo", ["bc", "marl", "dqn"])
def test_force_is_refused_where_no_tie_is_checked(algo: str, tmp_path: Path) -> None:
    """``force`` trains past a tie that ``--prior auto`` finds before an online run; the
    routes that choose no prior refuse it in one line, before any work."""
    from hpcpolicy.errors import ConfigError

    source = tmp_path if algo == "bc" else tmp_path / "jobs.parquet"
    with pytest.raises(ConfigError, match=r"^--force: "):
        hpcpolicy.train(source, algo=algo, options=TrainOptions(force=True))
