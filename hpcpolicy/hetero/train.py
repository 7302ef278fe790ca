"""Online (double) DQN on the GPU-type assignment environment, with d3rlpy, exported as a policy.

d3rlpy's ``fit_online`` runs the loop (act, store in a FIFO replay buffer, learn every
``update_interval`` steps); hpcpolicy supplies the environment
(:class:`~hpcpolicy.hetero.env.GpuAssignEnv`), the masked Q-network and explorer
(:mod:`hpcpolicy.hetero.networks`), the checkpoints and the export.

Layout of ``runs/NAME/`` (``hpcpolicy train jobs.parquet --algo dqn --cluster SPEC``)::

    config.json          GpuDqnConfig, the resolved reward scale, the GPU types, the data
    episodes.csv         one row per finished episode: step (environment steps when it
                         ended), return, mean_jct_s, idle_gpu_h, decisions, jobs, epsilon
    d3rlpy/              d3rlpy's own logs of the first session (params.json, one CSV per
                         metric: loss, rollout_return, time_*); a resumed session writes
                         d3rlpy-resumed-at-STEP/
    checkpoints/last.d3  weights and optimiser state (d3rlpy ``save_model``), every epoch
    checkpoints/last.json  the step it was taken at
    policy/              the deployable artifact (:mod:`hpcpolicy.hetero.export`)
    result.json          steps, wall time, last metrics

Resuming (``resume=True``) loads ``checkpoints/last.d3`` and trains up to ``steps`` (the only
field that may change).
d3rlpy cannot save its replay buffer or its step counter, so the buffer starts empty again
(learning waits ``update_start`` steps to refill it) and the explorer's schedule continues
from the checkpoint's step: a resumed run is close to, not identical with, an uninterrupted
one.

Example:
    >>> result = train_gpu_dqn(workload, cluster, GpuDqnConfig(steps=20_000),
    ...                        "runs/dqn-gpu")                      # doctest: +SKIP
"""

from __future__ import annotations

import csv
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from hpcpolicy.atomic import atomic_path, write_json
from hpcpolicy.cluster import ClusterSpec
from hpcpolicy.config import read_json_object
from hpcpolicy.errors import ConfigError
from hpcpolicy.hetero.config import GpuDqnConfig
from hpcpolicy.hetero.env import GpuAssignEnv
from hpcpolicy.hetero.reward import reward_spec
from hpcpolicy.learn.runs import TrainedRun
from hpcpolicy.workload import Workload

__all__ = ["EPISODE_COLUMNS", "GpuDqnResult", "train_gpu_dqn"]

EPISODE_COLUMNS = ("step", "return", "mean_jct_s", "idle_gpu_h", "decisions", "jobs",
                   "epsilon")
"""Columns of episodes.csv."""

Progress = Callable[[int, int], None]


class GpuDqnResult(TrainedRun):
    """Where a run ended: ``steps`` are environment steps of all sessions together;
    ``last_metrics`` the means over the last 10 episodes (return, mean_jct_s, idle_gpu_h)."""


class _EpisodeLog(gym.Wrapper[Any, Any, Any, Any]):
    """Records every finished episode (with the global step it ended at)."""

    def __init__(self, env: GpuAssignEnv, offset: int, rows: list[dict[str, float]],
                 epsilon: Callable[[int], float]) -> None:
        super().__init__(env)
        self.steps, self.rows, self.epsilon = offset, rows, epsilon
        self._offset = offset
        self._return = 0.0

    def reset(self, **kwargs: Any) -> Any:
        self._return = 0.0
        return self.env.reset(**kwargs)

    def step(self, action: Any) -> Any:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.steps += 1
        self._return += float(reward)
        if terminated:
            self.rows.append({"step": float(self.steps), "return": self._return,
                              "mean_jct_s": float(info["episode_jct_s"]),
                              "idle_gpu_h": float(info["episode_idle_gpu_h"]),
                              "decisions": float(info["episode_decisions"]),
                              "jobs": float(info["episode_jobs"]),
                              "epsilon": self.epsilon(self.steps - self._offset)})
        return obs, reward, terminated, truncated, info


def _write_rows(path: Path, rows: list[dict[str, float]]) -> None:
    with atomic_path(path) as tmp, tmp.open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(EPISODE_COLUMNS)
        for row in rows:
            writer.writerow([repr(row[c]) for c in EPISODE_COLUMNS])


def _read_rows(path: Path, upto: int) -> list[dict[str, float]]:
    if not path.is_file():
        return []
    with path.open(newline="", encoding="utf-8") as f:
        rows = [{k: float(v) for k, v in row.items()} for row in csv.DictReader(f)]
    return [row for row in rows if row["step"] <= upto]


def _last_metrics(rows: list[dict[str, float]]) -> dict[str, float]:
    tail = rows[-10:]
    return {k: float(np.mean([r[k] for r in tail])) for k in ("return", "mean_jct_s",
                                                             "idle_gpu_h")} if tail else {}


def _start(run: Path, cfg: GpuDqnConfig, resume: bool) -> int:
    """Steps already taken (0 for a fresh run); refuses a wrong directory, and a resumed
    run whose config differs in more than ``steps``."""
    if not resume:
        if (run / "config.json").exists():
            raise ConfigError(f"{run} already holds a run ({run / 'config.json'}); choose "
                              "another output directory, or continue it with --resume")
        return 0
    mark = run / "checkpoints" / "last.json"
    if not mark.is_file():
        raise ConfigError(f"{mark} not found: {run} has no checkpoint to resume from (one is "
                          "written at the end of every epoch)")
    saved = read_json_object(run / "config.json")
    changed = sorted(k for k, v in cfg.to_dict().items() if k != "steps" and saved.get(k) != v)
    if changed:
        details = "; ".join(f"{k}: {saved.get(k)!r} -> {cfg.to_dict()[k]!r}" for k in changed)
        raise ConfigError(f"cannot resume {run} with another configuration ({details}); only "
                          "--steps may change")
    step = read_json_object(mark).get("step")
    if not isinstance(step, int) or isinstance(step, bool) or step < 0:
        raise ConfigError(f"{mark}: expected the `step` count of the last checkpoint, got "
                          f"{step!r}")
    return step


def _checkpointing(run: Path, checkpoint: Path, rows: list[dict[str, float]], cfg: GpuDqnConfig,
                   done: int, progress: Progress | None) -> Callable[[Any, int, int], None]:
    """``fit_online``'s callback for a session that starts at step ``done``: progress every
    100 steps; at the end of every epoch and of the session, the checkpoint, the step it was
    taken at and episodes.csv."""
    todo = cfg.steps - done

    def on_step(algo: Any, epoch: int, step: int) -> None:
        if progress is not None and (step % 100 == 0 or step == todo):
            progress(done + step, cfg.steps)
        if step % cfg.epoch_steps == 0 or step == todo:
            with atomic_path(checkpoint) as tmp:
                algo.save_model(str(tmp))
            write_json(run / "checkpoints" / "last.json", {"step": done + step})
            _write_rows(run / "episodes.csv", rows)

    return on_step


def train_gpu_dqn(workload: Workload, cluster: ClusterSpec, cfg: GpuDqnConfig,
                  run_dir: str | Path, *, resume: bool = False,
                  training_data: Mapping[str, Any] | None = None,
                  progress: Progress | None = None) -> GpuDqnResult:
    """Train the GPU-type chooser online and export it to ``run_dir/policy``.

    Args:
        workload: The jobs; episodes are windows of its first ``cfg.train_frac``.
        cluster: The machine (at least two GPU types).
        cfg: Environment, reward and learner.
        run_dir: The run directory (new, or the one to resume).
        resume: Continue from ``run_dir/checkpoints/last.d3``.
        training_data: ``{"path", "sha256"}`` of the job table, for the manifest.
        progress: Called as ``progress(step, steps)`` every 100 environment steps.

    Returns:
        Where training ended; the policy is in ``run_dir/policy``.

    Raises:
        ConfigError: The directory holds a run (or, resuming, no checkpoint), the cluster
            has fewer than two GPU types, or the workload is too short for one window.
    """
    import torch

    from hpcpolicy.hetero.export import export_gpu_policy
    from hpcpolicy.hetero.networks import (
        MaskedEpsilonGreedy,
        dqn_algo,
        load_checkpoint,
        pool_q,
    )
    from hpcpolicy.learn.seeding import derive_seed, seed_everything
    from hpcpolicy.offline.quiet import d3rlpy_module

    run = Path(run_dir)
    done = _start(run, cfg, resume)
    d3 = d3rlpy_module()
    env = GpuAssignEnv(workload, cluster, cfg)
    pools = env.types
    reward = reward_spec(cfg.idle_weight, env.scale_s)
    if not resume:
        write_json(run / "config.json", {**cfg.to_dict(), "reward": reward,
                                          "pools": [list(p) for p in pools],
                                          "training_data": training_data})
    torch.set_num_threads(cfg.torch_threads)
    seed = cfg.seed if done == 0 else derive_seed(cfg.seed, done) % 2**32
    seed_everything(seed)
    d3.seed(seed)
    explorer = MaskedEpsilonGreedy(cfg.epsilon_start, cfg.epsilon_end, cfg.epsilon_steps, done)
    rows = _read_rows(run / "episodes.csv", done)
    logged = _EpisodeLog(env, done, rows, explorer.epsilon)
    logged.reset(seed=seed)  # seeds the windows' draws; fit_online's own reset() goes on
    algo = dqn_algo(cfg)
    algo.build_with_env(logged)
    checkpoint = run / "checkpoints" / "last.d3"
    if done:
        load_checkpoint(algo, checkpoint)
    buffer = d3.dataset.create_fifo_replay_buffer(cfg.buffer_size, env=logged)
    todo = cfg.steps - done
    tic = time.perf_counter()
    if todo > 0:
        algo.fit_online(logged, buffer, explorer, n_steps=todo,
                        n_steps_per_epoch=cfg.epoch_steps,
                        update_interval=cfg.update_interval, update_start_step=cfg.update_start,
                        experiment_name="d3rlpy" if done == 0 else f"d3rlpy-resumed-at-{done}",
                        with_timestamp=False,
                        logger_adapter=d3.logging.FileAdapterFactory(root_dir=str(run)),
                        show_progress=False, save_interval=todo + 1,
                        callback=_checkpointing(run, checkpoint, rows, cfg, done, progress))
    wall = time.perf_counter() - tic
    env.close()
    last = _last_metrics(rows)
    export_gpu_policy(pool_q(algo.impl.modules), run / "policy", pools=pools,
                      config=cfg.to_dict(), reward=reward, metrics=last,
                      training_data=training_data)
    result = GpuDqnResult(run, cfg.steps, wall, last)
    write_json(run / "result.json", result.to_dict())
    return result

