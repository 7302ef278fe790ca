"""Cooperative PPO of the selector and the allocator on their shared reward.

One update, in every worker (the loop of :mod:`hpcpolicy.ppo.ppo`, with two agents):

1. anneal both learning rates;
2. collect a rollout: whole episodes (:func:`hpcpolicy.marl.episode.play`) until the worker
   has at least ``num_steps`` decisions of the two agents together;
3. compute GAE (:func:`hpcpolicy.ppo.ppo.compute_gae`) over that one interleaved sequence of
   decisions, each valued by the critic of the agent that took it: both agents' advantages
   come from the same shared rewards, so a placement is credited with what it does to later
   selections and the other way round (cooperative, not competing);
4. optimise each agent with PPO's clipped objective on its own decisions (the update of
   :mod:`hpcpolicy.ppo.ppo`, gradients all-reduced over DD-PPO workers, each worker weighted by
   its share of that agent's decisions); an agent that some worker saw fewer than
   ``num_minibatches`` times in this rollout is left unchanged for this update;
5. log one row, checkpoint every ``checkpoint_every`` updates.

With ``warm_start`` set, a fresh run first fits the selector to a heuristic's choices
(:mod:`hpcpolicy.marl.warm_start`; the fit's facts go to ``warm_start.json``).

Run directories, checkpoints (both agents, both optimisers, counters, every worker's sampling
generator and window generator), Ctrl-C handling and resumption are those of
:mod:`hpcpolicy.learn.runs`. Because rollouts are whole episodes, a checkpoint holds no
environment state and a resumed run continues exactly as an uninterrupted one would.

Metrics (``metrics.csv``): the columns of :data:`hpcpolicy.learn.runs.METRICS` that apply
(``losses/*`` excepted), then per agent ``selector/<name>`` and ``allocator/<name>`` for
each loss of the PPO update (policy_loss, value_loss, entropy, old_approx_kl, approx_kl,
clipfrac, explained_variance, epochs), then ``env/<name>`` for the episode metrics of
:data:`hpcpolicy.marl.episode.EPISODE_METRICS` (means over the update's episodes).

Example:
    See :func:`train`.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from hpcpolicy.atomic import write_json
from hpcpolicy.errors import ConfigError
from hpcpolicy.learn.runs import (
    MetricsLog,
    RunPaths,
    StopOnSignal,
    resume_from,
)
from hpcpolicy.learn.seeding import derive_seed, seed_everything, worker_generator
from hpcpolicy.marl.artifact import export_marl
from hpcpolicy.marl.config import MarlConfig, MarlEnvConfig
from hpcpolicy.marl.episode import (
    EMPTY_WINDOWS,
    EPISODE_METRICS,
    Trajectory,
    WindowSource,
    play,
)
from hpcpolicy.marl.features import max_candidates
from hpcpolicy.marl.networks import AGENTS, TwoAgents
from hpcpolicy.marl.warm_start import clone_heuristic

# The PPO update and its storage are reused from the single-agent trainer, not copied.
from hpcpolicy.ppo.ppo import (
    Comm,
    Progress,
    Rollout,
    SingleProcess,
    TrainResult,
    compute_gae,
    episode_stats,
    optimise,
    save_run_checkpoint,
    setup_objects_frozen,
    update_row,
)
from hpcpolicy.ppo.vector import EpisodeStats

if TYPE_CHECKING:
    from hpcpolicy.cluster import ClusterSpec
    from hpcpolicy.workload import Workload

__all__ = ["run_marl", "train"]

def _collect(nets: TwoAgents, source: WindowSource, cfg: MarlConfig, gen: torch.Generator,
             device: torch.device) -> tuple[Trajectory, list[EpisodeStats]]:
    """Whole episodes until at least ``cfg.num_steps`` decisions are recorded."""
    traj = Trajectory()
    episodes: list[EpisodeStats] = []
    empty = 0
    while len(traj) < cfg.num_steps:
        episodes.append(play(source.next(), source, cfg, nets, gen, traj, device))
        empty = empty + 1 if episodes[-1].length == 0 else 0
        if empty == EMPTY_WINDOWS:
            raise ConfigError(f"{empty} windows in a row left the agents no choice to make "
                              "(every decision had a single option); use larger windows, a "
                              "busier workload or a cluster with more than one GPU pool")
    return traj, episodes


def _rollout(traj: Trajectory, agent: int, width: int, device: torch.device) -> Rollout:
    """One agent's decisions as the PPO update's storage, ``[T, 1, ...]`` tensors (options
    padded to ``width`` with masked slots)."""
    obs = traj.obs[agent]
    t, dim = len(obs), obs[0]["jobs"].shape[1]
    jobs = np.zeros((t, 1, width, dim), np.float32)
    mask = np.zeros((t, 1, width), np.bool_)
    for i, o in enumerate(obs):
        n = o["jobs"].shape[0]
        jobs[i, 0, :n], mask[i, 0, :n] = o["jobs"], o["mask"]
    positions = [i for i, a in enumerate(traj.agent) if a == agent]
    buf = Rollout.__new__(Rollout)  # filled here instead of from a vector of environments
    buf.jobs = torch.as_tensor(jobs, device=device)
    buf.cluster = torch.as_tensor(np.stack([o["cluster"] for o in obs])[:, None], device=device)
    buf.mask = torch.as_tensor(mask, device=device)
    buf.actions = torch.as_tensor(traj.actions[agent], device=device)[:, None]
    buf.logprobs = torch.as_tensor(traj.logprobs[agent], device=device)[:, None]
    buf.values = torch.as_tensor([traj.values[i] for i in positions], device=device)[:, None]
    return buf


def _learn(nets: TwoAgents, optimizers: Sequence[torch.optim.Optimizer], traj: Trajectory,
           weights: list[float], widths: tuple[int, int], cfg: MarlConfig, comm: Comm,
           gen: torch.Generator, device: torch.device) -> dict[str, float]:
    """GAE over the interleaved decisions, then each agent's PPO update on its own ones.

    ``weights``: each agent's share of its decisions over all workers, 0 to skip the agent
    (some worker saw it fewer than ``num_minibatches`` times). Returns its losses by name.
    """
    advantages, returns = compute_gae(
        torch.tensor(traj.rewards, device=device)[:, None],
        torch.tensor(traj.values, device=device)[:, None],
        torch.tensor(traj.dones, dtype=torch.float32, device=device)[:, None],
        torch.zeros(1, device=device), cfg.gamma, cfg.gae_lambda)
    losses: dict[str, float] = {}
    for a, name in enumerate(AGENTS):
        if not weights[a]:
            continue
        rows = torch.tensor([i for i, x in enumerate(traj.agent) if x == a], device=device)
        out = optimise(nets.agent(a), optimizers[a], _rollout(traj, a, widths[a], device),
                        len(traj.obs[a]), advantages[rows], returns[rows], cfg, comm,
                        weights[a], gen)
        losses.update({f"{name}/{key.split('/')[1]}": v for key, v in out.items()})
    return losses


@dataclass
class _Worker:
    """What one worker carries from update to update (and checkpoints)."""

    cfg: MarlConfig
    comm: Comm
    paths: RunPaths
    nets: TwoAgents
    optimizers: Sequence[torch.optim.Optimizer]
    source: WindowSource
    gen: torch.Generator
    metrics: MetricsLog

    def checkpoint(self, counters: Mapping[str, float]) -> None:
        """Save the networks, the optimisers, ``counters`` and every worker's generator and
        window state."""
        save_run_checkpoint(self.comm, self.paths, self.metrics, {
            "generator": self.gen.get_state(), "windows": self.source.state_dict()}, {
            "config": self.cfg.to_dict(), "model": self.nets.state_dict(),
            "optimizers": [o.state_dict() for o in self.optimizers],
            "counters": dict(counters)})


def _worker(cfg: MarlConfig, env: MarlEnvConfig, workload: Workload, cluster: ClusterSpec,
            paths: RunPaths, comm: Comm, device: torch.device) -> _Worker:
    """Seed, then build the episode source, the two agents and their optimisers."""
    torch.set_num_threads(cfg.torch_threads)
    seed_everything(cfg.seed)
    source = WindowSource(workload, cluster, env, derive_seed(cfg.seed, comm.rank, 0))
    nets = TwoAgents(cfg).to(device)
    comm.sync_parameters(nets)
    optimizers = [torch.optim.Adam(nets.agent(a).parameters(), lr=cfg.learning_rate, eps=1e-5)
                  for a in range(len(AGENTS))]
    return _Worker(cfg, comm, paths, nets, optimizers, source,
                   worker_generator(cfg.seed, comm.rank, device.type), MetricsLog(paths.metrics))


def _begin(w: _Worker, resume: bool, device: torch.device) -> tuple[int, int, float]:
    """Continue from the run's checkpoint (``resume``), or start the run: rank 0 writes its
    config, and a warm start clones the heuristic first. The counters: global step, update,
    training time of the earlier sessions."""
    cfg, paths = w.cfg, w.paths
    if resume:
        done = resume_from(paths, cfg, w.comm.world_size, w.comm.rank)
        w.nets.load_state_dict(done.checkpoint["model"])
        for optimizer, state in zip(w.optimizers, done.checkpoint["optimizers"], strict=True):
            optimizer.load_state_dict(state)
        w.gen.set_state(done.mine["generator"])
        w.source.load_state_dict(done.mine["windows"])
        w.metrics.load(done.update)
        return done.global_step, done.update, done.wall_time_s
    writer = w.comm.rank == 0
    if writer:
        paths.check_new()
        paths.write_config(cfg)
    if cfg.warm_start:
        fit = clone_heuristic(w.nets, w.source, cfg, w.comm, w.gen, device)
        if writer:
            write_json(paths.root / "warm_start.json", {"heuristic": cfg.warm_start, **fit})
    return 0, 0, 0.0


def _update(w: _Worker, env: MarlEnvConfig, stop: StopOnSignal, lr: float,
            device: torch.device) -> tuple[int, list[float], dict[str, float], bool]:
    """One update at learning rate ``lr``: whole episodes in every worker, then each agent's
    PPO step. The decisions collected by all workers, their summed counts and episode
    statistics, the losses, and whether a worker was asked to stop."""
    cfg, comm = w.cfg, w.comm
    for optimizer in w.optimizers:
        optimizer.param_groups[0]["lr"] = lr
    traj, episodes = _collect(w.nets, w.source, cfg, w.gen, device)
    counts = [len(traj.obs[a]) for a in range(len(AGENTS))]
    sums = comm.all_sum(torch.tensor(
        [len(traj), float(stop.requested), *counts,
         *(float(c >= cfg.num_minibatches) for c in counts),
         *episode_stats(episodes, EPISODE_METRICS)], dtype=torch.float64)).tolist()
    weights = [c / total if ok == comm.world_size else 0.0
               for c, total, ok in zip(counts, sums[2:4], sums[4:6], strict=True)]
    losses = _learn(w.nets, w.optimizers, traj, weights,
                    (env.k, max_candidates(w.source.topology)), cfg, comm, w.gen, device)
    return int(sums[0]), sums, losses, sums[1] > 0


def run_marl(cfg: MarlConfig, env: MarlEnvConfig, workload: Workload, cluster: ClusterSpec,
             run_dir: str | Path, comm: Comm, device: torch.device, *, resume: bool = False,
             provenance: Mapping[str, Any] | None = None,
             progress: Progress | None = None) -> TrainResult:
    """The training loop of one worker (:func:`train` in this process; DD-PPO workers from
    :mod:`hpcpolicy.marl.distributed`)."""
    paths = RunPaths(run_dir)
    writer = comm.rank == 0
    w = _worker(cfg, env, workload, cluster, paths, comm, device)
    global_step, update, wall_before = _begin(w, resume, device)
    session_start = time.perf_counter()
    row: dict[str, float] = dict(w.metrics.rows[-1]) if w.metrics.rows else {}
    stopped = False
    with StopOnSignal(paths.stop_request) as stop, setup_objects_frozen():
        while global_step < cfg.total_steps and not stopped:
            t0 = time.perf_counter()
            lr = cfg.learning_rate * (1.0 - global_step / cfg.total_steps if cfg.anneal_lr
                                      else 1.0)
            collected, sums, losses, stopped = _update(w, env, stop, lr, device)
            global_step += collected
            update += 1
            row = update_row(
                update, global_step, wall_before + time.perf_counter() - session_start,
                collected / (time.perf_counter() - t0), lr, losses, sums[6:9],
                EPISODE_METRICS, sums[9:], {})
            row.update(comm.extra_metrics(update, w.nets))
            if writer:
                w.metrics.append(row)
                if progress is not None:
                    progress(row)
            if update % cfg.checkpoint_every == 0 or stopped or global_step >= cfg.total_steps:
                w.checkpoint({"global_step": global_step, "update": update,
                              "wall_time_s": wall_before + time.perf_counter() - session_start})

    wall = wall_before + time.perf_counter() - session_start
    result = TrainResult(paths.root, global_step, update,
                         stopped and global_step < cfg.total_steps, wall, row)
    if writer:
        export_marl(w.nets, paths.policy, cfg=cfg, k=env.k, visible=env.visible,
                    candidates=max_candidates(w.source.topology), metrics=row,
                    provenance=provenance)
        write_json(paths.root / "result.json", result.to_dict())
        paths.stop_request.unlink(missing_ok=True)  # served
    return result


def train(cfg: MarlConfig, env: MarlEnvConfig, workload: Workload, cluster: ClusterSpec,
          run_dir: str | Path, *, resume: bool = False,
          provenance: Mapping[str, Any] | None = None,
          progress: Progress | None = None) -> TrainResult:
    """Train the two-agent scheduler in this process.

    Args:
        cfg: Hyperparameters, reward weights and budget (``total_steps`` decisions).
        env: Episodes: window size, k, backfilling, split.
        workload: The jobs.
        cluster: A GPU cluster.
        run_dir: ``runs/<name>``; gets config.json, metrics.csv, checkpoints/, policy/.
        resume: Continue from ``run_dir``'s last checkpoint (to identical results).
        provenance: Recorded in the artifact's manifest (``training_data`` and others).
        progress: Called with each update's metrics row.

    Returns:
        Where training ended (Ctrl-C, SIGTERM or a ``STOP`` file in ``run_dir`` stops it
        after the current update, with a checkpoint).

    Raises:
        ConfigError: A fresh run into a directory that holds one, or a resume that does not
            match.

    Example:
        >>> import sys, tempfile; sys.path.insert(0, "tests")      # doctest: +SKIP
        >>> r = train(MarlConfig(total_steps=256, num_steps=128), MarlEnvConfig(),
        ...           workload, cluster, tempfile.mkdtemp())         # doctest: +SKIP
    """
    RunPaths(run_dir).stop_request.unlink(missing_ok=True)  # left by a run that crashed
    return run_marl(cfg, env, workload, cluster, run_dir, SingleProcess(),
                    torch.device(cfg.device), resume=resume, provenance=provenance,
                    progress=progress)
