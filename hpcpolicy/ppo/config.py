"""Training configurations: one frozen, validated dataclass per algorithm, registered by name.

``hpcpolicy train --algo NAME`` maps ``NAME`` to a config class through :data:`ALGO_CONFIGS`;
an unknown name is a :class:`~hpcpolicy.errors.ConfigError` that lists the valid ones. Each run
writes its config as JSON (:meth:`PPOConfig.to_dict`) to ``runs/<name>/config.json``, and
:func:`config_from_dict` reads it back (used by ``--resume`` and by DD-PPO workers).

Example:
    >>> cfg = PPOConfig(total_steps=2048, num_envs=2, num_steps=64)
    >>> cfg.batch_size
    128
    >>> config_from_dict(cfg.to_dict()) == cfg
    True
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from hpcpolicy.config import Config, choice
from hpcpolicy.errors import ConfigError

__all__ = ["ALGO_CONFIGS", "DDPPOConfig", "PPOConfig", "config_class", "config_from_dict"]

_ACTIVATIONS = ("tanh", "relu")
_DEVICES = ("cpu", "cuda")
_BACKENDS = ("auto", "gloo", "nccl")


@dataclass(frozen=True)
class PPOConfig(Config):
    """PPO on vectorised environments, laid out like CleanRL's ``ppo.py``."""

    algo: ClassVar[str] = "ppo"
    label: ClassVar[str] = "ppo"

    seed: int = 1
    """Seed of the run: weights, action sampling, minibatch order and episode seeds."""
    total_steps: int = 1_000_000
    """Environment steps budget, summed over all environments and workers (``--steps``)."""
    num_envs: int = 8
    """Environments stepped in lockstep by each worker."""
    num_steps: int = 128
    """Steps per environment in one rollout; a rollout holds ``num_envs * num_steps`` steps."""
    learning_rate: float = 3e-4
    """Adam learning rate at the start of training."""
    anneal_lr: bool = True
    """Decay the learning rate linearly to 0 over ``total_steps``."""
    gamma: float = 0.99
    """Discount factor."""
    gae_lambda: float = 0.95
    """Lambda of generalised advantage estimation."""
    num_minibatches: int = 4
    """Minibatches per epoch; every worker uses the same count."""
    update_epochs: int = 4
    """Passes over the rollout per update (fewer when ``target_kl`` stops early)."""
    norm_adv: bool = True
    """Normalise advantages within each minibatch."""
    clip_coef: float = 0.2
    """Clipping range of the probability ratio in the surrogate objective."""
    clip_vloss: bool = True
    """Clip the value loss as in the PPO paper's implementation."""
    ent_coef: float = 0.01
    """Weight of the entropy bonus."""
    vf_coef: float = 0.5
    """Weight of the value loss."""
    max_grad_norm: float = 0.5
    """Global gradient-norm clip."""
    target_kl: float | None = 0.015
    """Stop the update's epochs early once the approximate KL exceeds this (None = never)."""
    hidden: tuple[int, ...] = (32, 16, 8)
    """Hidden layer widths of the per-job scoring MLP (32-16-8 as in RLScheduler)."""
    value_hidden: tuple[int, ...] = (32, 16)
    """Hidden widths of the value network (job embedding, then the head)."""
    activation: str = choice("tanh", _ACTIVATIONS)
    """Activation of both networks: tanh or relu."""
    rank_bias: float = 1.0
    """With a prior heuristic ordering the slots (``train --prior``): logit subtracted per slot
    rank, so the policy starts as that heuristic (:class:`~hpcpolicy.learn.networks.JobScorer`).
    Unused without a prior."""
    device: str = choice("cpu", _DEVICES)
    """cpu or cuda (DD-PPO uses cuda:LOCAL_RANK)."""
    torch_threads: int = 1
    """Intra-op threads per process; 1 lets workers share cores without contention."""
    checkpoint_every: int = 10
    """Write a checkpoint every this many updates (and always at the end or on Ctrl-C)."""
    snapshot_every: int = 0
    """Also export the policy as it is every this many updates, to ``snapshots/update_NNNNNN``
    (0 = never). Returns are noisy and a later policy is not always better: compare the
    snapshots on windows of the training part (``hpcpolicy evaluate --split train``) and
    deploy the best, never choosing on the test part."""
    episode_metric_names: tuple[str, ...] = ()
    """Keys of ``info["episode_metrics"]`` at episode end to log as ``env/<name>`` columns."""

    def validate(self) -> None:
        self._at_least(0, "seed", "snapshot_every")
        self._at_least(1, "total_steps", "num_envs", "num_steps", "num_minibatches",
                       "update_epochs", "torch_threads", "checkpoint_every")
        self._require(self.learning_rate > 0, "learning_rate",
                      f"must be > 0, got {self.learning_rate}")
        for name in ("gamma", "gae_lambda"):
            value = getattr(self, name)
            self._require(0.0 <= value <= 1.0, name, f"must be in [0, 1], got {value}")
        for name in ("clip_coef", "max_grad_norm"):
            self._require(getattr(self, name) > 0, name, f"must be > 0, got {getattr(self, name)}")
        self._at_least(0, "ent_coef", "vf_coef", "rank_bias")
        self._require(self.target_kl is None or self.target_kl > 0, "target_kl",
                      f"must be > 0 or null, got {self.target_kl}")
        for name in ("hidden", "value_hidden"):
            widths = getattr(self, name)
            self._require(len(widths) >= 1 and min(widths) >= 1, name,
                          f"must be one or more positive integers, got {list(widths)}")
        self._require(self.batch_size >= self.num_minibatches, "num_minibatches",
                      f"{self.num_minibatches} minibatches need a rollout of at least that many "
                      f"steps (num_envs * num_steps = {self.batch_size})")

    # -- computed at runtime ---------------------------------------------------------------
    @property
    def batch_size(self) -> int:
        """Steps one worker collects per rollout: ``num_envs * num_steps``."""
        return self.num_envs * self.num_steps

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict, with ``algo`` naming the config class."""
        return {"algo": self.algo, **super().to_dict()}


@dataclass(frozen=True)
class DDPPOConfig(PPOConfig):
    """Decentralised distributed PPO: PPO in every torchrun worker, gradients all-reduced."""

    algo: ClassVar[str] = "ddppo"
    label: ClassVar[str] = "ddppo"

    backend: str = choice("auto", _BACKENDS)
    """Collective backend: gloo (CPU), nccl (GPU), or auto (nccl when device is cuda)."""
    sync_frac: float = 1.0
    """Straggler cut-off: once this fraction of workers has finished its rollout, the others
    stop collecting (after ``min_rollout_frac`` of their steps). 1.0 = off; DD-PPO uses 0.6."""
    min_rollout_frac: float = 0.25
    """Share of a rollout a worker always collects before it may be cut off."""
    sync_check_every: int = 0
    """Every this many updates, compare the parameters of all workers bit for bit and log the
    largest difference as ``sync/param_max_diff`` (0 = never)."""
    timeout_s: int = 1800
    """Seconds a collective waits for the slowest worker before failing."""
    pin_cpus: bool = True
    """Give each worker ``torch_threads`` CPUs of its own when this machine has enough for all
    workers (Linux). Workers wait for each other at every minibatch, so one moved between cores
    slows them all; turn it off when several runs share the machine."""

    def validate(self) -> None:
        super().validate()
        self._require(not (self.backend == "nccl" and self.device == "cpu"), "backend",
                      "nccl needs device cuda; use gloo (or auto) on CPU")
        for name in ("sync_frac", "min_rollout_frac"):
            value = getattr(self, name)
            self._require(0.0 < value <= 1.0, name, f"must be in (0, 1], got {value}")
        self._at_least(0, "sync_check_every")
        self._at_least(1, "timeout_s")


ALGO_CONFIGS: dict[str, type[PPOConfig]] = {"ppo": PPOConfig, "ddppo": DDPPOConfig}
"""Online algorithms by ``--algo`` name."""


def config_class(algo: str) -> type[PPOConfig]:
    """The config class registered for ``algo``.

    Raises:
        ConfigError: Unknown name; the message lists the valid ones.
    """
    try:
        return ALGO_CONFIGS[algo]
    except KeyError:
        raise ConfigError(f"unknown algo {algo!r}; valid: {', '.join(sorted(ALGO_CONFIGS))}") \
            from None


def config_from_dict(data: dict[str, Any]) -> PPOConfig:
    """Rebuild a config from :meth:`PPOConfig.to_dict` output (e.g. a run's config.json).

    Raises:
        ConfigError: Unknown algo, unknown keys, or invalid values.
    """
    data = dict(data)
    return config_class(str(data.pop("algo", "ppo"))).from_dict(data)
