"""DD-PPO through torchrun on this machine: identical parameters, world size 1, cut-off, resume.

Each test starts real worker processes (``torchrun --standalone``) on the toy environment with
budgets of a few hundred steps.
"""

from __future__ import annotations

import csv
import functools
import os
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from hpcpolicy.errors import ConfigError  # noqa: E402
from hpcpolicy.learn.runs import load_checkpoint  # noqa: E402
from hpcpolicy.ppo.config import DDPPOConfig, PPOConfig  # noqa: E402
from hpcpolicy.ppo.ddppo import launch  # noqa: E402
from hpcpolicy.ppo.ppo import TrainResult, train  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
FACTORY = "benchmarks.builders.rl_toy_env:make_rank_toy_env"
CFG = DDPPOConfig(total_steps=1024, num_envs=4, num_steps=32, update_epochs=2,
                  checkpoint_every=2, sync_check_every=1, seed=7)


@pytest.fixture(autouse=True)
def _toy_env_importable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONPATH", str(ROOT))


def _rows(run: Path) -> list[dict[str, float]]:
    with open(run / "metrics.csv", newline="") as f:
        return [{k: float(v) if v else float("nan") for k, v in r.items()}
                for r in csv.DictReader(f)]


def _model(run: Path) -> dict[str, Any]:
    model: dict[str, Any] = load_checkpoint(run / "checkpoints" / "last.pt")["model"]
    return model


def _same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


@pytest.fixture(scope="module")
def two_workers(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, TrainResult]:
    run = tmp_path_factory.mktemp("dd") / "run"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PYTHONPATH", str(ROOT))
        result = launch(CFG, FACTORY, run, workers=2)
    return run, result


def test_two_workers_keep_identical_parameters(two_workers: tuple[Path, TrainResult]) -> None:
    run, result = two_workers
    rows = _rows(run)
    assert result.global_step == 1024 and result.updates == 4  # 2 workers x 4 envs x 32 steps
    assert [r["global_step"] for r in rows] == [256, 512, 768, 1024]
    assert [r["sync/param_max_diff"] for r in rows] == [0.0] * 4
    assert [r["ddppo/workers_cut"] for r in rows] == [0.0] * 4
    ckpt = load_checkpoint(run / "checkpoints" / "last.pt")
    seeds = [w["envs"]["seeds"] for w in ckpt["workers"]]
    assert len(seeds) == 2 and seeds[0] != seeds[1]  # each rank runs its own episodes
    assert (run / "policy" / "manifest.json").is_file()


def test_resume_after_a_worker_crash_is_identical(two_workers: tuple[Path, TrainResult],
                                                  tmp_path: Path) -> None:
    straight, _ = two_workers
    run = tmp_path / "run"
    # rank 1's first env crashes in update 3 (each env takes 32 steps per update)
    with pytest.raises(RuntimeError, match="DD-PPO workers failed"):
        launch(CFG, FACTORY, run, workers=2, env_kwargs={"crash_rank": 1, "crash_at": 70})
    assert load_checkpoint(run / "checkpoints" / "last.pt")["counters"]["update"] == 2
    with pytest.raises(ConfigError, match="resume with --workers 2"):
        launch(CFG, FACTORY, run, workers=1, resume=True)
    launch(CFG, FACTORY, run, workers=2, resume=True)
    assert _same(_model(straight), _model(run))
    drop = {"wall_time_s", "sps"}
    assert [{k: v for k, v in r.items() if k not in drop} for r in _rows(straight)] == \
        [{k: v for k, v in r.items() if k not in drop} for r in _rows(run)]


def test_ctrl_c_on_one_worker_stops_all_after_the_update(tmp_path: Path) -> None:
    # each env takes 32 steps per update: step 40 of rank 1's envs falls in update 2
    result = launch(CFG, FACTORY, tmp_path / "run", workers=2,
                    env_kwargs={"interrupt_rank": 1, "interrupt_at": 40})
    assert result.interrupted and result.updates == 2 and result.global_step == 512
    ckpt = load_checkpoint(tmp_path / "run" / "checkpoints" / "last.pt")
    assert ckpt["counters"]["update"] == 2 and len(ckpt["workers"]) == 2
    assert (tmp_path / "run" / "policy" / "manifest.json").is_file()


def _when_running(run: Path, act: Callable[[], None]) -> threading.Thread:
    """A thread that calls ``act`` once the run's first checkpoint is written."""
    def wait_then_act() -> None:
        while not (run / "checkpoints" / "last.pt").exists():
            time.sleep(0.05)
        act()

    thread = threading.Thread(target=wait_then_act, daemon=True)
    thread.start()
    return thread


@pytest.mark.slow  # over the ten-minute budget of the default suite; run with -m slow
@pytest.mark.parametrize("how", ["SIGINT", "SIGTERM", "STOP file"])
def test_the_launcher_stops_its_workers(tmp_path: Path, how: str) -> None:
    # a signal to the launching process alone (``kill``; a terminal's Ctrl-C, now that
    # torchrun has a session of its own), or the run's STOP file
    run = tmp_path / "run"
    cfg = replace(CFG, total_steps=256 * 2000)
    act = ((lambda: (run / "STOP").touch()) if how == "STOP file" else
           functools.partial(os.kill, os.getpid(), getattr(signal, how)))
    thread = _when_running(run, act)
    result = launch(cfg, FACTORY, run, workers=2)
    thread.join()
    assert result.interrupted and 2 <= result.updates < 2000
    assert load_checkpoint(run / "checkpoints" / "last.pt")["counters"]["update"] == \
        result.updates
    assert (run / "policy" / "manifest.json").is_file() and not (run / "STOP").exists()


def _processes_of(run: Path) -> list[str]:
    """Command lines of the live processes that name ``run`` (Linux's /proc)."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            text = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue  # ended meanwhile
        if str(run) in text:
            found.append(text)
    return found


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs Linux's /proc")
def test_a_second_ctrl_c_ends_torchrun_and_the_workers_at_once(
        tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "run"
    cfg = replace(CFG, total_steps=256 * 2000)

    def twice() -> None:  # the second once the first has asked the workers to stop
        os.kill(os.getpid(), signal.SIGINT)
        while not (run / "STOP").exists():
            time.sleep(0.005)
        os.kill(os.getpid(), signal.SIGINT)

    thread = _when_running(run, twice)
    with pytest.raises(KeyboardInterrupt):
        launch(cfg, FACTORY, run, workers=2, env_kwargs={"slow_rank": 1, "delay_s": 0.005})
    thread.join()
    assert _processes_of(run) == []  # no worker left training
    assert "Traceback" not in capfd.readouterr().err  # torchrun did not print one
    assert load_checkpoint(run / "checkpoints" / "last.pt")["counters"]["update"] >= 1


def test_a_stale_stop_file_does_not_stop_a_new_run(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "STOP").touch()  # left by a run that crashed
    from benchmarks.builders.rl_toy_env import make_rank_toy_env
    ppo_cfg = PPOConfig(**{f.name: getattr(CFG, f.name) for f in fields(PPOConfig)})
    result = train(replace(ppo_cfg, total_steps=256), make_rank_toy_env, run)
    assert not result.interrupted and result.global_step == 256
    assert not (run / "STOP").exists()


def test_one_worker_warns_and_matches_ppo(tmp_path: Path,
                                          capfd: pytest.CaptureFixture[str]) -> None:
    cfg = replace(CFG, total_steps=256, sync_check_every=0)
    launch(cfg, FACTORY, tmp_path / "dd", workers=1)
    assert "DD-PPO with a single worker" in capfd.readouterr().err
    from benchmarks.builders.rl_toy_env import make_rank_toy_env
    ppo_cfg = PPOConfig(**{f.name: getattr(cfg, f.name) for f in fields(PPOConfig)})
    train(ppo_cfg, make_rank_toy_env, tmp_path / "ppo")
    assert _same(_model(tmp_path / "dd"), _model(tmp_path / "ppo"))


@pytest.mark.slow  # over the ten-minute budget of the default suite; run with -m slow
def test_straggler_cut_off(tmp_path: Path) -> None:
    cfg = replace(CFG, total_steps=768, sync_frac=0.5, min_rollout_frac=0.25)
    launch(cfg, FACTORY, tmp_path / "run", workers=2,
           env_kwargs={"slow_rank": 1, "delay_s": 0.01})
    rows = _rows(tmp_path / "run")
    steps = [b["global_step"] - a["global_step"]
             for a, b in zip([{"global_step": 0.0}, *rows], rows, strict=False)]
    cut = [r["ddppo/workers_cut"] for r in rows]
    assert any(c >= 1 for c in cut), cut
    full, least = 2 * 4 * 32, 4 * 32 + 4 * 8  # rank 1 keeps at least 25 % of its 32 steps
    for n, c in zip(steps, cut, strict=True):
        assert (n < full) == (c >= 1) and n >= least
    assert all(r["sync/param_max_diff"] == 0.0 for r in rows)


@pytest.mark.parametrize(("rank", "workers", "threads", "cpus", "pinned"), [
    (1, 2, 1, [0, 1], [1]),                # one CPU each
    (1, 2, 2, [0, 1, 2, 3, 4], [2, 3]),    # a block of torch_threads CPUs each
    (0, 1, 1, [0, 1], None),               # a lone worker waits for nobody
    (1, 3, 1, [0, 1], None),               # not enough CPUs for one each
])
def test_pin_to_own_cpus(monkeypatch: pytest.MonkeyPatch, rank: int, workers: int, threads: int,
                         cpus: list[int], pinned: list[int] | None) -> None:
    import os

    from hpcpolicy.ppo.ddppo import pin_to_own_cpus

    calls: list[list[int]] = []
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(cpus), raising=False)
    monkeypatch.setattr(os, "sched_setaffinity", lambda pid, s: calls.append(sorted(s)),
                        raising=False)
    monkeypatch.setenv("LOCAL_RANK", str(rank))
    monkeypatch.setenv("LOCAL_WORLD_SIZE", str(workers))
    monkeypatch.setenv("OMP_NUM_THREADS", str(threads))
    pin_to_own_cpus()
    assert calls == ([] if pinned is None else [pinned])


def test_workers_start_from_an_initial_policy(two_workers: tuple[Path, TrainResult],
                                              tmp_path: Path) -> None:
    from hpcpolicy.ppo.warm_start import policy_weights

    start, _ = two_workers
    cfg = replace(CFG, total_steps=256, learning_rate=1e-12)  # too slow to move the weights
    launch(cfg, FACTORY, tmp_path / "run", workers=2, initial_policy=start / "policy")
    rows = _rows(tmp_path / "run")
    assert all(r["sync/param_max_diff"] == 0.0 for r in rows)
    before = policy_weights(start / "policy")
    after = policy_weights(tmp_path / "run" / "policy")
    for key, value in before.items():
        torch.testing.assert_close(after[key], value)
