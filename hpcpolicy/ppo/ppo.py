"""Proximal Policy Optimisation, laid out like CleanRL's ``ppo.py``, as a library function.

Per update (CleanRL's order): anneal the learning rate; collect a rollout of ``num_steps``
steps in each of ``num_envs`` environments; bootstrap and compute GAE (:func:`compute_gae`);
optimise the clipped surrogate objective, the (clipped) value loss and the entropy bonus over
``update_epochs`` epochs of ``num_minibatches`` minibatches, stopping early when the approximate
KL exceeds ``target_kl``; log one row of metrics; checkpoint every ``checkpoint_every`` updates
and, if asked, export a snapshot of the policy every ``snapshot_every``.

The same loop runs DD-PPO (:mod:`hpcpolicy.ppo.ddppo`): everything that differs between one
process and many is behind the small :class:`Comm` interface, which :class:`SingleProcess`
implements trivially here.

Example:
    See :func:`train`.
"""

from __future__ import annotations

import gc
import math
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch
from torch import nn

from hpcpolicy.atomic import write_json
from hpcpolicy.env.prior import OLDEST
from hpcpolicy.learn.networks import ActorCritic, slots_in_use
from hpcpolicy.learn.runs import (
    MetricsLog,
    RunPaths,
    StopOnSignal,
    resume_from,
    save_checkpoint,
)
from hpcpolicy.learn.seeding import derive_seed, seed_everything, worker_generator
from hpcpolicy.ppo.config import PPOConfig
from hpcpolicy.ppo.vector import EpisodeStats, Obs, SyncEnvs

__all__ = ["NO_EPISODE", "Comm", "Rollout", "SingleProcess", "TrainResult", "compute_gae",
           "episode_stats", "optimise", "progress_words", "run_training", "save_run_checkpoint",
           "setup_objects_frozen", "train", "update_row"]

EnvFactory = Callable[[], Any]
Progress = Callable[[Mapping[str, float]], None]


def compute_gae(rewards: torch.Tensor, values: torch.Tensor, dones: torch.Tensor,
                next_value: torch.Tensor, gamma: float,
                gae_lambda: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalised advantage estimates and returns (a pure function).

    Args:
        rewards: ``[T, N]`` reward of step t (a truncated episode's bootstrap already added).
        values: ``[T, N]`` value of the observation at step t.
        dones: ``[T, N]`` 1.0 where the episode ended with step t, else 0.0.
        next_value: ``[N]`` value of the observation after the last step.
        gamma: Discount factor.
        gae_lambda: GAE's lambda.

    Returns:
        ``(advantages, returns)``, both ``[T, N]``, with ``returns = advantages + values``.

    Example:
        >>> r = torch.tensor([[1.0], [1.0]]); v = torch.zeros(2, 1); d = torch.tensor([[0.], [1.]])
        >>> adv, ret = compute_gae(r, v, d, torch.tensor([5.0]), 0.5, 1.0)
        >>> adv[:, 0].tolist()
        [1.5, 1.0]
    """
    advantages = torch.zeros_like(rewards)
    last = torch.zeros_like(next_value)
    for t in reversed(range(rewards.shape[0])):
        following = next_value if t == rewards.shape[0] - 1 else values[t + 1]
        nonterminal = 1.0 - dones[t]
        delta = rewards[t] + gamma * following * nonterminal - values[t]
        last = delta + gamma * gae_lambda * nonterminal * last
        advantages[t] = last
    return advantages, advantages + values


class Comm(Protocol):
    """What the training loop needs from its workers' group (one process or many)."""

    rank: int
    world_size: int

    def all_sum(self, values: torch.Tensor) -> torch.Tensor:
        """Element-wise sum over workers."""

    def average_gradients(self, params: list[nn.Parameter], weight: float) -> None:
        """Replace each gradient by the sum over workers of ``weight * gradient``."""

    def keep_collecting(self, update: int, step: int) -> bool:
        """Whether to take rollout step ``step`` (False once the straggler cut-off fires)."""

    def rollout_done(self, update: int) -> None:
        """Tell the others this worker finished collecting for ``update``."""

    def gather(self, obj: dict[str, Any]) -> list[dict[str, Any]] | None:
        """Every worker's ``obj``, on rank 0 (None elsewhere)."""

    def sync_parameters(self, module: nn.Module) -> None:
        """Make every worker's parameters equal to rank 0's."""

    def extra_metrics(self, update: int, module: nn.Module) -> dict[str, float]:
        """Metrics this group adds to the update's row."""


class SingleProcess:
    """The :class:`Comm` of a single process: nothing to exchange."""

    rank, world_size = 0, 1

    def all_sum(self, values: torch.Tensor) -> torch.Tensor:
        return values

    def average_gradients(self, params: list[nn.Parameter], weight: float) -> None:
        return None

    def keep_collecting(self, update: int, step: int) -> bool:
        return True

    def rollout_done(self, update: int) -> None:
        return None

    def gather(self, obj: dict[str, Any]) -> list[dict[str, Any]] | None:
        return [obj]

    def sync_parameters(self, module: nn.Module) -> None:
        return None

    def extra_metrics(self, update: int, module: nn.Module) -> dict[str, float]:
        return {}


@dataclass(frozen=True)
class TrainResult:
    """Where a training run ended."""

    run_dir: Path
    """The run directory."""
    global_step: int
    """Environment steps taken, all workers."""
    updates: int
    """Updates done."""
    interrupted: bool
    """True when stopped by a signal before the budget was spent (resume with --resume)."""
    wall_time_s: float
    """Training time over all sessions of the run."""
    last_metrics: dict[str, float]
    """The last row of metrics.csv."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return {**asdict(self), "run_dir": str(self.run_dir)}


class Rollout:
    """Storage of one rollout, ``[num_steps, num_envs, ...]`` tensors (CleanRL's buffers)."""

    def __init__(self, cfg: PPOConfig, envs: SyncEnvs, device: torch.device) -> None:
        t, n = cfg.num_steps, cfg.num_envs
        self.jobs = torch.zeros((t, n, envs.k, envs.job_dim), device=device)
        self.cluster = torch.zeros((t, n, envs.cluster_dim), device=device)
        self.mask = torch.zeros((t, n, envs.k), dtype=torch.bool, device=device)
        self.actions = torch.zeros((t, n), dtype=torch.long, device=device)
        self.logprobs, self.rewards, self.dones, self.values = (
            torch.zeros((t, n), device=device) for _ in range(4))


def _tensors(obs: Obs, device: torch.device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Observation arrays as (jobs, cluster, mask) tensors on ``device``."""
    return tuple(torch.as_tensor(obs[k], device=device)  # type: ignore[return-value]
                 for k in ("jobs", "cluster", "mask"))


def _collect(agent: ActorCritic, envs: SyncEnvs, obs: Obs, buf: Rollout, cfg: PPOConfig,
             comm: Comm, update: int, gen: torch.Generator,
             device: torch.device) -> tuple[int, Obs, list[EpisodeStats]]:
    """Fill ``buf`` with up to ``num_steps`` steps; (steps taken, next obs, ended episodes)."""
    episodes: list[EpisodeStats] = []
    steps = 0
    while steps < cfg.num_steps and comm.keep_collecting(update, steps):
        jobs, cluster, mask = _tensors(obs, device)
        buf.jobs[steps], buf.cluster[steps], buf.mask[steps] = jobs, cluster, mask
        k = slots_in_use(mask)
        with torch.no_grad():
            action, logprob, _, value = agent.get_action_and_value(
                jobs[:, :k], cluster, mask[:, :k], generator=gen)
        result = envs.step(action.cpu().numpy())
        reward = torch.as_tensor(result.rewards, device=device)
        if result.final_obs:  # truncated episodes: bootstrap from their last observation
            with torch.no_grad():
                for i, final in result.final_obs.items():
                    reward[i] += cfg.gamma * agent.get_value(*_tensors(final, device))[0]
        buf.actions[steps], buf.logprobs[steps], buf.values[steps] = action, logprob, value
        buf.rewards[steps] = reward
        buf.dones[steps] = torch.as_tensor(result.terminated | result.truncated, device=device)
        episodes += result.episodes
        obs = result.obs
        steps += 1
    comm.rollout_done(update)
    return steps, obs, episodes


def optimise(agent: ActorCritic, optimizer: torch.optim.Optimizer, buf: Rollout, steps: int,
              advantages: torch.Tensor, returns: torch.Tensor, cfg: PPOConfig, comm: Comm,
              weight: float, gen: torch.Generator, slots: int | None = None) -> dict[str, float]:
    """PPO's epochs of minibatch updates on the first ``steps`` rows of ``buf``, on its first
    ``slots`` job slots (all by default): the slots after the last valid one
    (:func:`slots_in_use`) are not even copied. The networks work on the valid slots alone, so
    a minibatch costs what its valid slots do, whatever the cut."""
    def flat(x: torch.Tensor) -> torch.Tensor:
        return x[:steps].reshape(-1, *x.shape[2:])

    b_jobs, b_cluster, b_mask = (flat(buf.jobs[:, :, :slots]), flat(buf.cluster),
                                 flat(buf.mask[:, :, :slots]))
    b_actions, b_logprobs, b_values = flat(buf.actions), flat(buf.logprobs), flat(buf.values)
    b_adv, b_returns = flat(advantages), flat(returns)
    params = list(agent.parameters())
    clipfracs: list[float] = []
    epochs = 0
    for _ in range(cfg.update_epochs):
        epochs += 1
        order = torch.randperm(b_actions.shape[0], generator=gen, device=gen.device)
        for mb in torch.tensor_split(order, cfg.num_minibatches):
            _, newlogprob, entropy, newvalue = agent.get_action_and_value(
                b_jobs[mb], b_cluster[mb], b_mask[mb], b_actions[mb])
            logratio = newlogprob - b_logprobs[mb]
            ratio = logratio.exp()
            with torch.no_grad():
                old_approx_kl = (-logratio).mean()
                approx_kl = ((ratio - 1) - logratio).mean()
                clipfracs.append(((ratio - 1.0).abs() > cfg.clip_coef).float().mean().item())
            mb_adv = b_adv[mb]
            if cfg.norm_adv and mb_adv.numel() > 1:
                mb_adv = (mb_adv - mb_adv.mean()) / (mb_adv.std() + 1e-8)
            # clipped surrogate objective
            pg_loss = torch.max(-mb_adv * ratio,
                                -mb_adv * ratio.clamp(1 - cfg.clip_coef, 1 + cfg.clip_coef)).mean()
            # value loss, optionally clipped around the rollout's values
            v_unclipped = (newvalue - b_returns[mb]) ** 2
            if cfg.clip_vloss:
                v_clipped = b_values[mb] + (newvalue - b_values[mb]).clamp(-cfg.clip_coef,
                                                                            cfg.clip_coef)
                v_loss = 0.5 * torch.max(v_unclipped, (v_clipped - b_returns[mb]) ** 2).mean()
            else:
                v_loss = 0.5 * v_unclipped.mean()
            entropy_loss = entropy.mean()
            loss = pg_loss - cfg.ent_coef * entropy_loss + cfg.vf_coef * v_loss

            optimizer.zero_grad()
            loss.backward()  # type: ignore[no-untyped-call]
            comm.average_gradients(params, weight)
            nn.utils.clip_grad_norm_(params, cfg.max_grad_norm)
            optimizer.step()
        # KL early stop, decided on the workers' mean so every worker stops at the same epoch
        mean_kl = comm.all_sum(approx_kl.reshape(1))[0].item() / comm.world_size
        if cfg.target_kl is not None and mean_kl > cfg.target_kl:
            break

    y_pred, y_true = b_values.cpu().numpy(), b_returns.cpu().numpy()
    var_y = float(np.var(y_true))
    return {
        "losses/policy_loss": pg_loss.item(), "losses/value_loss": v_loss.item(),
        "losses/entropy": entropy_loss.item(), "losses/old_approx_kl": old_approx_kl.item(),
        "losses/approx_kl": mean_kl, "losses/clipfrac": float(np.mean(clipfracs)),
        "losses/explained_variance":
            math.nan if var_y == 0 else 1.0 - float(np.var(y_true - y_pred)) / var_y,
        "train/epochs": float(epochs),
    }


@contextmanager
def setup_objects_frozen() -> Iterator[None]:
    """Exempt every object made so far from the cyclic garbage collector while inside.

    Set-up made most of what a training process holds (modules, the workload, the networks);
    scanning it again at each full collection made pauses that the other workers waited out
    at the next minibatch's all-reduce. On leaving, the objects are collectable again, so a
    process that trains several times does not keep each run's set-up.
    """
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


NO_EPISODE = "no episode ended in this update"
"""What progress says of an update in which no episode ended (its return is undefined)."""


def progress_words(row: Mapping[str, float]) -> str:
    """An update's return for a progress line (:func:`update_row`'s row), or
    :data:`NO_EPISODE`, never ``nan``.

    Example:
        >>> progress_words({"charts/episodes": 0.0, "charts/episodic_return": float("nan")})
        'no episode ended in this update'
    """
    if not row.get("charts/episodes"):
        return NO_EPISODE
    return f"return {row['charts/episodic_return']:.4g}"


def update_row(update: int, global_step: int, wall_time_s: float, sps: float, lr: float,
               losses: Mapping[str, float], episodes: Sequence[float], names: Sequence[str],
               env_sums: Sequence[float], extra: Mapping[str, float]) -> dict[str, float]:
    """One row of metrics.csv: counters, ``episodes`` = (count, summed return, summed length)
    of the episodes that ended, the losses, ``extra``, then each of ``names`` as the mean of
    its (total, count) pair in ``env_sums`` (NaN without episodes)."""
    n_ep, returns, lengths = episodes
    row = {"update": float(update), "global_step": float(global_step),
           "wall_time_s": wall_time_s, "sps": sps,
           "charts/episodic_return": returns / n_ep if n_ep else math.nan,
           "charts/episodic_length": lengths / n_ep if n_ep else math.nan,
           "charts/episodes": n_ep, "charts/learning_rate": lr, **losses, **extra}
    for j, name in enumerate(names):
        total, count = env_sums[2 * j], env_sums[2 * j + 1]
        row[f"env/{name}"] = total / count if count else math.nan
    return row


def episode_stats(episodes: list[EpisodeStats], names: tuple[str, ...]) -> list[float]:
    """Sums to all-reduce: count, return, length, then (sum, count) per episode metric."""
    out = [float(len(episodes)), sum(e.reward for e in episodes),
           float(sum(e.length for e in episodes))]
    for name in names:
        present = [e.metrics[name] for e in episodes if name in e.metrics]
        out += [sum(present), float(len(present))]
    return out


@dataclass
class _Session:
    """What one training process carries from update to update (and checkpoints)."""

    cfg: PPOConfig
    comm: Comm
    paths: RunPaths
    envs: SyncEnvs
    agent: ActorCritic
    optimizer: torch.optim.Optimizer
    gen: torch.Generator
    metrics: MetricsLog
    obs: Obs
    global_step: int = 0
    update: int = 0
    wall_before: float = 0.0
    """Training time of the sessions before this one (a resumed run's)."""
    started: float = field(default_factory=time.perf_counter)

    def wall(self) -> float:
        """Training time so far, earlier sessions included."""
        return self.wall_before + time.perf_counter() - self.started

    def checkpoint(self) -> None:
        """Save the model, the optimiser, the counters and every worker's generator and
        environment state."""
        save_run_checkpoint(self.comm, self.paths, self.metrics, {
            "generator": self.gen.get_state(), "envs": self.envs.state_dict()}, {
            "config": self.cfg.to_dict(), "model": self.agent.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "counters": {"global_step": self.global_step, "update": self.update,
                         "wall_time_s": self.wall()}})


def save_run_checkpoint(comm: Comm, paths: RunPaths, metrics: MetricsLog, mine: dict[str, Any],
                        shared: dict[str, Any]) -> None:
    """The run's checkpoint: ``shared`` (identical in every worker) and, under ``workers``,
    each worker's own state ``mine``; gathered and written by rank 0, with the metrics so far
    (every worker calls this)."""
    states = comm.gather(mine)
    if comm.rank == 0 and states is not None:
        metrics.flush()
        save_checkpoint(paths.checkpoint, {**shared, "workers": states})


def _open_session(cfg: PPOConfig, make_env: EnvFactory, paths: RunPaths, comm: Comm,
                  device: torch.device, resume: bool,
                  initial_scorer: Mapping[str, torch.Tensor] | None) -> _Session:
    """Seed, build the environments, networks and optimiser; then continue from the run's
    checkpoint (``resume``) or start the run (rank 0 writes its config)."""
    torch.set_num_threads(cfg.torch_threads)
    seed_everything(cfg.seed)
    envs = SyncEnvs(make_env, cfg.num_envs, derive_seed(cfg.seed, comm.rank, 0))
    agent = ActorCritic(envs.job_dim, envs.cluster_dim, cfg.hidden, cfg.value_hidden,
                        cfg.activation, 0.0 if envs.slot_order == OLDEST else cfg.rank_bias
                        ).to(device)
    if initial_scorer is not None and not resume:
        agent.scorer.load_state_dict(initial_scorer)
    comm.sync_parameters(agent)
    optimizer = torch.optim.Adam(agent.parameters(), lr=cfg.learning_rate, eps=1e-5)
    gen = worker_generator(cfg.seed, comm.rank, device.type)
    metrics = MetricsLog(paths.metrics)
    if not resume:
        if comm.rank == 0:
            paths.check_new()
            paths.write_config(cfg)
        return _Session(cfg, comm, paths, envs, agent, optimizer, gen, metrics, envs.reset())
    done = resume_from(paths, cfg, comm.world_size, comm.rank)
    agent.load_state_dict(done.checkpoint["model"])
    optimizer.load_state_dict(done.checkpoint["optimizer"])
    gen.set_state(done.mine["generator"])
    obs = envs.load_state_dict(done.mine["envs"])
    metrics.load(done.update)
    return _Session(cfg, comm, paths, envs, agent, optimizer, gen, metrics, obs,
                    done.global_step, done.update, done.wall_time_s)


def _update(s: _Session, buf: Rollout, stop: StopOnSignal,
            device: torch.device) -> tuple[dict[str, float], bool]:
    """One update: anneal the learning rate, collect a rollout in every worker, optimise on
    all of it. Its metrics row, and whether a worker was asked to stop."""
    cfg, comm = s.cfg, s.comm
    t0 = time.perf_counter()
    lr = cfg.learning_rate * (1.0 - s.global_step / cfg.total_steps if cfg.anneal_lr else 1.0)
    s.optimizer.param_groups[0]["lr"] = lr
    steps, s.obs, episodes = _collect(s.agent, s.envs, s.obs, buf, cfg, comm, s.update, s.gen,
                                      device)
    sums = comm.all_sum(torch.tensor(
        [steps * cfg.num_envs, float(stop.requested), float(steps < cfg.num_steps),
         *episode_stats(episodes, cfg.episode_metric_names)], dtype=torch.float64)).tolist()
    collected, stopped = int(sums[0]), sums[1] > 0
    with torch.no_grad():
        next_value = s.agent.get_value(*_tensors(s.obs, device))
    advantages, returns = compute_gae(buf.rewards[:steps], buf.values[:steps], buf.dones[:steps],
                                      next_value, cfg.gamma, cfg.gae_lambda)
    losses = optimise(s.agent, s.optimizer, buf, steps, advantages, returns, cfg, comm,
                      steps * cfg.num_envs / collected, s.gen, slots_in_use(buf.mask[:steps]))
    s.global_step += collected
    s.update += 1
    row = update_row(s.update, s.global_step, s.wall(), collected / (time.perf_counter() - t0),
                     lr, losses, sums[3:6], cfg.episode_metric_names, sums[6:],
                     {"ddppo/workers_cut": sums[2]} if comm.world_size > 1 else {})
    row.update(comm.extra_metrics(s.update, s.agent))
    return row, stopped


def run_training(cfg: PPOConfig, make_env: EnvFactory, run_dir: str | Path, comm: Comm,
                 device: torch.device, *, resume: bool = False,
                 provenance: Mapping[str, Any] | None = None,
                 progress: Progress | None = None,
                 initial_scorer: Mapping[str, torch.Tensor] | None = None) -> TrainResult:
    """The training loop shared by PPO and DD-PPO; :func:`train` is the public entry point."""
    from hpcpolicy.learn.export import export_policy

    paths = RunPaths(run_dir)
    writer = comm.rank == 0
    s = _open_session(cfg, make_env, paths, comm, device, resume, initial_scorer)
    buf = Rollout(cfg, s.envs, device)
    row: dict[str, float] = dict(s.metrics.rows[-1]) if s.metrics.rows else {}
    stopped = False
    try:
        with StopOnSignal(paths.stop_request) as stop, setup_objects_frozen():
            while s.global_step < cfg.total_steps and not stopped:
                row, stopped = _update(s, buf, stop, device)
                if writer:
                    s.metrics.append(row)
                    if progress is not None:
                        progress(row)
                if writer and cfg.snapshot_every and s.update % cfg.snapshot_every == 0:
                    export_policy(s.agent, paths.snapshot(s.update), config=cfg.to_dict(),
                                  metrics=row, provenance=provenance, k=s.envs.k,
                                  slot_order=s.envs.slot_order)
                if s.update % cfg.checkpoint_every == 0 or stopped \
                        or s.global_step >= cfg.total_steps:
                    s.checkpoint()
    finally:
        s.envs.close()

    result = TrainResult(paths.root, s.global_step, s.update,
                         stopped and s.global_step < cfg.total_steps, s.wall(), row)
    if writer:
        export_policy(s.agent, paths.policy, config=cfg.to_dict(), metrics=row,
                      provenance=provenance, k=s.envs.k, slot_order=s.envs.slot_order)
        write_json(paths.root / "result.json", result.to_dict())
        paths.stop_request.unlink(missing_ok=True)  # served
    return result


def train(cfg: PPOConfig, make_env: EnvFactory, run_dir: str | Path, *, resume: bool = False,
          provenance: Mapping[str, Any] | None = None,
          progress: Progress | None = None,
          initial_scorer: Mapping[str, torch.Tensor] | None = None) -> TrainResult:
    """Train a scheduling policy with PPO in this process.

    Args:
        cfg: Hyperparameters and budget (``total_steps`` environment steps).
        make_env: Builds one environment that follows :mod:`hpcpolicy.env.spaces`.
        run_dir: ``runs/<name>``; gets config.json, metrics.csv, checkpoints/, policy/.
        resume: Continue from ``run_dir``'s last checkpoint (to identical results).
        provenance: Recorded in the policy manifest: ``reward`` (name or weights) and
            ``training_data`` (``{"path", "sha256"}``), and any other JSON-ready keys.
        progress: Called with each update's metrics row.
        initial_scorer: Start the policy from these :class:`~hpcpolicy.learn.networks.JobScorer`
            weights (e.g. an offline-trained policy) instead of a random initialisation; the
            value network starts fresh. Ignored on resume.

    Returns:
        Where training ended. Ctrl-C (SIGINT), SIGTERM or a ``STOP`` file in ``run_dir``
        stops it after the current update, with a checkpoint and the policy written; a second
        Ctrl-C aborts at once.

    Raises:
        ConfigError: Fresh run into a directory that holds one, or a resume that does not match.

    Example:
        >>> import tempfile
        >>> from benchmarks.builders.rl_toy_env import make_toy_env
        >>> r = train(PPOConfig(total_steps=128, num_envs=2, num_steps=64), make_toy_env,
        ...           tempfile.mkdtemp())
        >>> (r.global_step, r.updates)
        (128, 1)
    """
    RunPaths(run_dir).stop_request.unlink(missing_ok=True)  # left by a run that crashed
    return run_training(cfg, make_env, run_dir, SingleProcess(), torch.device(cfg.device),
                        resume=resume, provenance=provenance, progress=progress,
                        initial_scorer=initial_scorer)
