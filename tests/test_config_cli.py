"""Files that configure a command (--config JSON, cluster TOML/JSON): a value of the wrong type,
non-finite or absurdly large is a one-line error naming the field, never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_helpers import invoke, one_line_error
from env_jobs import write_table


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_table(tmp_path_factory.mktemp("config") / "jobs.parquet", 120)


TINY = ["--steps", "64", "--num-envs", "1", "--window-size", "20", "--k", "4"]


@pytest.mark.parametrize(("text", "expected"), [
    ('{"learning_rate": "fast"}', "`learning_rate`: must be a number, got 'fast'"),
    ('{"gamma": [1]}', "`gamma`: must be a number, got [1]"),
    ('{"num_steps": 99999999999999999999}', "`num_steps`: must be an integer of magnitude"),
    ('{"clip_coef": Infinity}', "`clip_coef`: must be a finite number, got inf"),
    ('{"update_epochs": true}', "`update_epochs`: must be an integer, got True"),
    ('{"hidden": "32,16"}', "`hidden`: must be a list of integers, got '32,16'"),
])
def test_train_config_file_of_wrong_types(table: Path, tmp_path: Path, text: str,
                                          expected: str) -> None:
    pytest.importorskip("torch")
    config = tmp_path / "ppo.json"
    config.write_text(text)
    line = one_line_error(invoke("train", str(table), *TINY, "--config", str(config), "-o",
                                 str(tmp_path / "run")))
    assert expected in line
    assert not (tmp_path / "run" / "policy").exists()


def test_tune_config_file_of_wrong_type(table: Path, tmp_path: Path) -> None:
    pytest.importorskip("torch")
    config = tmp_path / "ppo.json"
    config.write_text('{"ent_coef": NaN}')
    line = one_line_error(invoke("tune", str(table), "--config", str(config), "-o",
                                 str(tmp_path / "tune")))
    assert "`ent_coef`: must be a finite number, got nan" in line


@pytest.mark.parametrize(("group", "expected"), [
    ("cores = 99999999999999999999", "groups[0].cores must be <= 16777216, not "
     "99999999999999999999"),
    ("cores = 8\ngpu_speed = inf", "groups[0].gpu_speed must be a finite number, not inf"),
    ("cores = 8\ngpu_speed = nan", "groups[0].gpu_speed must be a finite number, not nan"),
    ("cores = 8\nmem_mib = 1e300", "groups[0].mem_mib must be <= 1073741824, not 1e+300"),
])
def test_cluster_spec_of_absurd_numbers(table: Path, tmp_path: Path, group: str,
                                        expected: str) -> None:
    spec = tmp_path / "spec.toml"
    spec.write_text(f'[[groups]]\nname = "cpu"\ncount = 4\n{group}\n')
    line = one_line_error(invoke("simulate", str(table), "--cluster", str(spec)))
    assert line == f"error: {spec}: {expected}"


@pytest.mark.parametrize("text", ["[1]", '{"factory": 3, "kwargs": {}}', '{"factory": "f"}',
                                  "{not json"])
def test_env_json_of_another_shape_is_refused_on_resume(tmp_path: Path, text: str) -> None:
    from hpcpolicy.errors import ConfigError
    from hpcpolicy.training.environment import ENV_FILE, record_environment

    (tmp_path / ENV_FILE).write_text(text)
    with pytest.raises(ConfigError, match=f"{tmp_path / ENV_FILE}: "):
        record_environment(tmp_path, "hpcpolicy.env.factory:make_env", {"env": {}}, resume=True)


@pytest.mark.parametrize(("text", "expected"), [
    ("{oops", "cannot be read as JSON"),
    ('{"config": [], "env_kwargs": {}, "provenance": {}}', "expected an object with the objects"),
    ('{"config": {"algo": "ddppo", "gamma": "high"}, "env_kwargs": {}, "provenance": {}}',
     "ddppo config field `gamma`: must be a number, got 'high'"),
])
def test_launch_json_of_another_shape_or_type_is_refused(tmp_path: Path, text: str,
                                                         expected: str) -> None:
    pytest.importorskip("torch")
    from hpcpolicy.errors import ConfigError
    from hpcpolicy.ppo.ddppo import LAUNCH_FILE, worker_main

    (tmp_path / LAUNCH_FILE).write_text(text)
    with pytest.raises(ConfigError) as info:
        worker_main(tmp_path)
    assert str(info.value).startswith(f"{tmp_path / LAUNCH_FILE}: ")
    assert expected in str(info.value)
