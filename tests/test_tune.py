"""``hpcpolicy tune``: exploit/explore, the validation cut, copying weights, tunes end to end,
resume to the uninterrupted result, DD-PPO members, and one-line errors."""

from __future__ import annotations

import csv
import dataclasses
import functools
import json
import math
import os
import signal
from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("gymnasium")
pytest.importorskip("onnxruntime")

from cli_helpers import invoke, one_line_error  # noqa: E402
from env_jobs import write_table  # noqa: E402

from benchmarks.builders.rl_toy_env import make_toy_env  # noqa: E402
from hpcpolicy.env import EnvConfig  # noqa: E402
from hpcpolicy.env.factory import env_kwargs  # noqa: E402
from hpcpolicy.errors import ConfigError  # noqa: E402
from hpcpolicy.learn.runs import RESUMABLE_CHANGES, TUNE_CHANGES, RunPaths, load_checkpoint  # noqa: E402
from hpcpolicy.ppo.config import DDPPOConfig, PPOConfig  # noqa: E402
from hpcpolicy.ppo.ppo import train  # noqa: E402
from hpcpolicy.tune import TuneConfig, TuneEvent, tune  # noqa: E402
from hpcpolicy.tune.member import copy_weights  # noqa: E402
from hpcpolicy.tune.pbt import (  # noqa: E402
    HYPERPARAMETERS,
    exploit_explore,
    initial_hyperparameters,
)
from hpcpolicy.tune.record import TunePaths, TuneRecord  # noqa: E402
from hpcpolicy.tune.validation import carve  # noqa: E402

BASE = {"learning_rate": 3e-4, "ent_coef": 0.01, "clip_coef": 0.2}
ROLLOUT = {"num_steps": 32, "num_minibatches": 2, "update_epochs": 2, "checkpoint_every": 1}
# 3 members x 2 rounds of 2 updates of 64 steps, scored on 3 windows of 40 validation jobs
TINY = ["--population", "3", "--steps", "256", "--interval", "128", "--num-envs", "2",
        "--window-size", "40", "--k", "8", "--val-windows", "3", "--seed", "3"]
# 2 members x 2 rounds of 3 updates of 64 steps
SMALL = TuneConfig(population=2, total_steps=384, interval=192, seed=5, val_windows=2,
                   val_window_size=40)
MEMBER = PPOConfig(num_envs=2, anneal_lr=False, **ROLLOUT)  # type: ignore[arg-type]
TIMING = {"wall_time_s", "sps"}


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_table(tmp_path_factory.mktemp("tune") / "jobs.parquet", 300)


@pytest.fixture(scope="module")
def rollout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("cfg") / "ppo.json"
    path.write_text(json.dumps(ROLLOUT))
    return path


def _hypers(i: int) -> dict[str, float]:
    return {name: value * (1 + i / 10) for name, value in BASE.items()}


# --- exploit / explore as a pure function ---------------------------------------------------

def test_bottom_quantile_copies_a_top_member_and_perturbs_its_hyperparameters() -> None:
    hypers = [_hypers(i) for i in range(4)]
    new, events = exploit_explore([3.0, 1.0, 4.0, 2.0], hypers, np.random.default_rng(0))
    assert [(e.member, e.source) for e in events] == [(2, 1)]  # worst copies best
    assert events[0].before == hypers[2] and new[2] == events[0].after
    for name in HYPERPARAMETERS:
        assert round(new[2][name] / hypers[1][name], 9) in (0.8, 1.25)
    assert [new[i] for i in (0, 1, 3)] == [hypers[i] for i in (0, 1, 3)]

    sources = set()
    for seed in range(20):
        _, events = exploit_explore([3.0, 1.0, 4.0, 2.0], hypers, np.random.default_rng(seed),
                                    quantile=0.5)
        assert [e.member for e in events] == [0, 2]
        sources |= {e.source for e in events}
    assert sources == {1, 3}  # each of the top half is drawn

    # a NaN score ranks last; equal scores rank by index
    _, events = exploit_explore([1.0, math.nan, 2.0, 1.0], hypers, np.random.default_rng(0))
    assert [(e.member, e.source) for e in events] == [(1, 0)]


def test_explore_stays_within_bounds_and_a_seed_reproduces_every_draw() -> None:
    top = {name: high for name, (_, high) in HYPERPARAMETERS.items()}
    seen: dict[str, set[float]] = {name: set() for name in HYPERPARAMETERS}
    for seed in range(20):
        new, _ = exploit_explore([0.0, 1.0], [top, dict(BASE)], np.random.default_rng(seed))
        for name, (_, high) in HYPERPARAMETERS.items():
            seen[name].add(new[1][name])
            assert new[1][name] <= high
    assert all(values == {top[n], top[n] * 0.8} for n, values in seen.items())

    hypers = [_hypers(i) for i in range(8)]
    scores = [5.0, 1.0, 7.0, 3.0, 2.0, 8.0, 6.0, 4.0]

    def draw(seed: int) -> Any:
        new, events = exploit_explore(scores, hypers, np.random.default_rng(seed))
        return new, [(e.member, e.source) for e in events]

    assert draw(1) == draw(1)
    assert len({json.dumps(draw(seed)) for seed in range(5)}) > 1


def test_initial_population_spreads_around_the_base_config() -> None:
    first = initial_hyperparameters(BASE, 6, np.random.default_rng(1), 2.0)
    assert first[0] == BASE and len({json.dumps(h) for h in first}) == 6
    for member in first:
        for name, value in member.items():
            assert BASE[name] / 2 <= value <= BASE[name] * 2
    assert first == initial_hyperparameters(BASE, 6, np.random.default_rng(1), 2.0)
    assert initial_hyperparameters(BASE, 3, np.random.default_rng(1), 1.0) == [BASE] * 3


# --- the validation part ---------------------------------------------------------------------

def test_validation_part_is_the_end_of_the_training_part() -> None:
    cfg = TuneConfig(val_frac=0.2, val_windows=3, val_window_size=40)
    v = carve(300, EnvConfig(window_size=40), cfg)
    assert v.jobs == (168, 210) and v.train_frac == 0.56  # 0.7 * 0.8 of 300 jobs
    assert len(v.starts) == 3 and all(168 <= s <= 210 - 40 for s in v.starts)
    assert v.starts == carve(300, EnvConfig(window_size=40), cfg).starts
    with pytest.raises(ConfigError, match="holds 42 jobs, too few for 3 distinct window"):
        carve(300, EnvConfig(), dataclasses.replace(cfg, val_window_size=41))
    with pytest.raises(ConfigError, match="not split 'all'"):
        carve(300, EnvConfig(split="all"), cfg)


# --- exploit copies weights and optimiser; members may change their hyperparameters ---------

def test_exploit_copies_model_and_optimiser_and_keeps_the_members_own_state(
        tmp_path: Path) -> None:
    cfg = PPOConfig(total_steps=64, num_envs=2, num_steps=32, num_minibatches=2,
                    update_epochs=1, anneal_lr=False)
    train(dataclasses.replace(cfg, seed=1), make_toy_env, tmp_path / "a")
    train(dataclasses.replace(cfg, seed=2), make_toy_env, tmp_path / "b")
    a, b = (load_checkpoint(RunPaths(tmp_path / n).checkpoint) for n in "ab")
    copy_weights(RunPaths(tmp_path / "a").checkpoint, tmp_path / "b")
    copy_weights(RunPaths(tmp_path / "a").checkpoint, tmp_path / "b")  # twice, as on resume
    after = load_checkpoint(RunPaths(tmp_path / "b").checkpoint)
    assert all(torch.equal(after["model"][k], a["model"][k]) for k in a["model"])
    assert not all(torch.equal(b["model"][k], a["model"][k]) for k in a["model"])
    moments = after["optimizer"]["state"][0]["exp_avg"]
    assert torch.equal(moments, a["optimizer"]["state"][0]["exp_avg"])
    assert after["config"] == b["config"] and after["counters"] == b["counters"]
    assert torch.equal(after["workers"][0]["generator"], b["workers"][0]["generator"])

    # an explored learning rate may continue a tune member, not an ordinary run
    faster = dataclasses.replace(cfg, seed=2, total_steps=128, learning_rate=4e-4)
    assert RunPaths(tmp_path / "b").resumable_changes() == RESUMABLE_CHANGES
    with pytest.raises(ConfigError, match=r"learning_rate: 0\.0003 -> 0\.0004"):
        train(faster, make_toy_env, tmp_path / "b", resume=True)
    RunPaths(tmp_path / "b").tune_member.write_text("{}")
    assert set(TUNE_CHANGES) <= set(RunPaths(tmp_path / "b").resumable_changes())
    assert train(faster, make_toy_env, tmp_path / "b", resume=True).global_step == 128


# --- tunes end to end ----------------------------------------------------------------------

def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return [{k: v for k, v in row.items() if k not in TIMING} for row in csv.DictReader(f)]


def test_tune_writes_its_record_and_the_best_policy(table: Path, rollout: Path,
                                                    tmp_path: Path) -> None:
    from hpcpolicy.artifact import load_policy

    out = tmp_path / "tune"
    result = invoke("tune", str(table), *TINY, "--config", str(rollout), "-o", str(out))
    assert result.exit_code == 0, result.output
    assert "best: m" in result.output and "heuristics on the same windows: fcfs" in result.output
    record = json.loads((out / "tune.json").read_text())
    assert record["status"] == "done" and record["validation"]["jobs"] == [168, 210]
    first, last = record["rounds"]
    assert [r["steps"] for r in record["rounds"]] == [128, 256]
    assert all(isinstance(s, float) for r in record["rounds"] for s in r["scores"].values())
    assert last["exploits"] == [] and record["best"]["member"] == last["ranking"][0]
    assert record["best"]["val_bsld"] == min(last["scores"].values())
    (event,) = first["exploits"]  # 3 members: the worst copies the best
    assert (event["member"], event["copied"]) == (first["ranking"][-1], first["ranking"][0])
    assert last["hyperparameters"][event["member"]] == event["after"]

    rows = _rows(out / "tune.csv")
    assert [(r["round"], r["member"]) for r in rows] == [
        (r, m) for r in ("1", "2") for m in ("m0", "m1", "m2")]
    assert [r["copied"] for r in rows if r["copied"]] == [event["copied"]]

    # the explored learning rate is the one the copying member trained with in round 2
    member = out / "members" / event["member"]
    rates = [float(r["charts/learning_rate"]) for r in _rows(member / "metrics.csv")]
    assert rates == [event["before"]["learning_rate"]] * 2 + [event["after"]["learning_rate"]] * 2
    assert json.loads((member / "config.json").read_text())["clip_coef"] == \
        event["after"]["clip_coef"]
    manifest = json.loads((member / "policy" / "manifest.json").read_text())
    assert manifest["provenance"]["split"]["jobs"] == [0, 168]  # never the validation jobs

    best = out / "members" / record["best"]["member"] / "policy"
    assert (out / "policy" / "manifest.json").read_text() == \
        (best / "manifest.json").read_text()
    assert load_policy(out / "policy").manifest["observation"]["k"] == 8
    # its score is what `evaluate` gives on the validation windows
    starts = ",".join(map(str, record["validation"]["starts"]))
    evaluated = invoke("evaluate", str(table), "--policy", str(out / "policy"), "--split",
                       "train", "--window-starts", starts, "--window-size", "40",
                       "--json", str(tmp_path / "e.json"))
    assert evaluated.exit_code == 0, evaluated.output
    (run,) = json.loads((tmp_path / "e.json").read_text())["runs"]
    assert run["summary"]["mean_bsld"] == record["best"]["val_bsld"]

    line = one_line_error(invoke("tune", str(table), *TINY, "--config", str(rollout),
                                 "-o", str(out), "--population", "2", "--resume"))
    assert f"cannot resume the tune in {out} with different options (config.population: " \
           "3 -> 2); give the options it was started with" in line
    line = one_line_error(invoke("tune", str(table), *TINY, "--config", str(rollout),
                                 "-o", str(out)))
    assert "already holds a tune" in line and "--resume" in line


def _tune(table: Path, out: Path, *, resume: bool = False, progress: Any = None) -> Any:
    return tune(SMALL, MEMBER, env_kwargs(table, EnvConfig(k=8, window_size=40)), out,
                resume=resume, progress=progress)


def _same_tune(a: Path, b: Path) -> None:
    ra, rb = (json.loads((d / "tune.json").read_text()) for d in (a, b))
    for r in (ra, rb):
        del r["wall_time_s"]
    assert ra == rb
    assert (a / "tune.csv").read_text() == (b / "tune.csv").read_text()
    for name in ("m0", "m1"):
        assert _rows(a / "members" / name / "metrics.csv") == \
            _rows(b / "members" / name / "metrics.csv")


def test_a_stopped_tune_resumes_to_the_uninterrupted_result(table: Path, tmp_path: Path) -> None:
    whole = _tune(table, tmp_path / "whole")
    assert not whole.interrupted and whole.record.rounds[0]["exploits"]

    def ctrl_c(event: TuneEvent) -> None:  # Ctrl-C in round 2, as m1 is training
        if (event.phase, event.round, event.member, event.steps) == ("train", 2, "m1", 256):
            os.kill(os.getpid(), signal.SIGINT)

    stopped = _tune(table, tmp_path / "sigint", progress=ctrl_c)
    assert stopped.interrupted and stopped.record.status == "interrupted"
    assert stopped.record.trained == ["m0"] and len(stopped.record.rounds) == 1
    assert load_checkpoint(RunPaths(tmp_path / "sigint/members/m1").checkpoint)[
        "counters"]["global_step"] == 320  # stopped after its next update
    assert not _tune(table, tmp_path / "sigint", resume=True).interrupted
    _same_tune(tmp_path / "whole", tmp_path / "sigint")

    def late_ctrl_c(event: TuneEvent) -> None:  # in m1's last update: the tune stops after it
        if (event.phase, event.round, event.member, event.steps) == ("train", 2, "m1", 320):
            os.kill(os.getpid(), signal.SIGINT)

    stopped = _tune(table, tmp_path / "late", progress=late_ctrl_c)
    assert stopped.interrupted and stopped.record.trained == ["m0", "m1"]
    _tune(table, tmp_path / "late", resume=True)
    _same_tune(tmp_path / "whole", tmp_path / "late")

    def killed(event: TuneEvent) -> None:  # dies after deciding, before copying the weights
        if event.phase == "exploit":
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        _tune(table, tmp_path / "kill", progress=killed)
    assert not json.loads((tmp_path / "kill/tune.json").read_text())["rounds"][0]["applied"]
    _tune(table, tmp_path / "kill", resume=True)
    _same_tune(tmp_path / "whole", tmp_path / "kill")


def test_ddppo_members_train_through_launch(table: Path, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """The tune hands DD-PPO members to ``launch`` (workers, resume, the members' environment);
    the fake trains in this process, as one worker would."""
    from hpcpolicy.env.factory import make_env
    from hpcpolicy.ppo import ddppo

    calls: list[dict[str, Any]] = []

    def fake_launch(cfg: Any, factory: str, run: Path, **kwargs: Any) -> Any:
        calls.append({"run": Path(run).name, "factory": factory, **kwargs})
        make = functools.partial(make_env, **kwargs["env_kwargs"])
        return train(cfg, make, run, resume=kwargs["resume"], provenance=kwargs["provenance"])

    monkeypatch.setattr(ddppo, "launch", fake_launch)
    cfg = dataclasses.replace(SMALL, workers=2)
    base = DDPPOConfig(num_envs=1, anneal_lr=False, **ROLLOUT)  # type: ignore[arg-type]
    result = tune(cfg, base, env_kwargs(table, EnvConfig(k=8, window_size=40)), tmp_path / "dd")
    assert result.record.status == "done"
    assert [(c["run"], c["resume"], c["workers"]) for c in calls] == [
        ("m0", False, 2), ("m1", False, 2), ("m0", True, 2), ("m1", True, 2)]
    assert {c["factory"] for c in calls} == {"hpcpolicy.env.factory:make_env"}
    assert {c["env_kwargs"]["env"]["train_frac"] for c in calls} == {0.56}


@pytest.mark.slow
def test_ddppo_tune_with_two_workers(table: Path, rollout: Path, tmp_path: Path) -> None:
    """Real torchrun workers (about a minute on 2 cores)."""
    out = tmp_path / "dd"
    result = invoke("tune", str(table), "--algo", "ddppo", "--workers", "2", *TINY[2:],
                    "--population", "2", "--config", str(rollout), "-o", str(out))
    assert result.exit_code == 0, result.output
    record = json.loads((out / "tune.json").read_text())
    assert record["status"] == "done" and len(record["rounds"]) == 2
    assert len(load_checkpoint(RunPaths(out / "members/m0").checkpoint)["workers"]) == 2


# --- one-line errors -----------------------------------------------------------------------

def test_bad_options_are_one_line_errors(table: Path, tmp_path: Path) -> None:
    out = ["-o", str(tmp_path / "t")]
    cases = [
        (["--population", "1"], "--population 1: population-based training needs at least 2 "
                                "members"),
        (["--steps", "1000", "--interval", "2000"], "--interval 2000 is larger than --steps "
                                                    "1000"),
        (["--steps", "1000", "--interval", "100", "--num-envs", "2"],
         "--interval 100 is shorter than one update (2 environments x 128 steps x 1 worker(s) "
         "= 256 steps); give at least 256"),
        (["--workers", "2"], "--workers 2 needs --algo ddppo"),
        (["--algo", "cql"], "unknown --algo 'cql'; a tune trains online: ddppo, ppo"),
        (["--resume"], "--resume needs --out"),
        (["--val-frac", "1.5"], "--val-frac 1.5: must be in (0, 1)"),
    ]
    for args, message in cases:
        assert message in one_line_error(invoke("tune", str(table), *args)), args
    assert "no tune at" in one_line_error(invoke("tune", str(table), "--resume", *out))
    assert "no such file" in one_line_error(invoke("tune", str(tmp_path / "x.parquet"), *out))
    assert "the validation part (the last --val-frac 0.05 of the training part: jobs " \
           "199..209) holds 11 jobs, too few" in one_line_error(
               invoke("tune", str(table), "--val-frac", "0.05", "--window-size", "40",
                      "--steps", "2048", "--interval", "1024", *out))
    annealed = tmp_path / "anneal.json"
    annealed.write_text('{"anneal_lr": true}')
    assert "config field `anneal_lr` is true" in one_line_error(
        invoke("tune", str(table), "--config", str(annealed), *out))
    wild = tmp_path / "wild.json"
    wild.write_text('{"learning_rate": 0.5}')
    assert "config field `learning_rate` is 0.5, outside the range" in one_line_error(
        invoke("tune", str(table), "--config", str(wild), *out))
    assert not (tmp_path / "t").exists()  # nothing written before the checks


@pytest.mark.parametrize(("text", "message"), [
    ("{broken", "cannot be read as JSON"),
    ("[1, 2]", "expected a JSON object, got list"),
    ('{"format": "hpcpolicy.tune/1", "oops": 1}', "expected the fields"),
])
def test_a_damaged_tune_record_is_one_line(tmp_path: Path, text: str, message: str) -> None:
    paths = TunePaths(tmp_path)
    tmp_path.mkdir(exist_ok=True)
    paths.record.write_text(text)
    with pytest.raises(ConfigError, match=message):
        TuneRecord.load(paths)
