"""Configuration of the heterogeneous-GPU assignment task and of its online DQN.

One frozen, validated dataclass (:class:`GpuDqnConfig`) holds the environment (episodes,
backfilling, the ADLRO reward's lambda and scale) and the learner (d3rlpy's (double) DQN,
exploration, network); it serialises to JSON next to every run.

Example:
    >>> cfg = GpuDqnConfig(idle_weight=0.5, steps=1000)
    >>> cfg.to_dict()["idle_weight"], cfg.epoch_steps
    (0.5, 1000)
    >>> GpuDqnConfig.from_dict({"steps": 0})
    Traceback (most recent call last):
    ...
    hpcpolicy.errors.ConfigError: dqn-gpu config field `steps`: must be >= 1, got 0
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Self

from hpcpolicy.config import Config, choice
from hpcpolicy.sim.types import BACKFILL_MODES
from hpcpolicy.world.protocol import TRAIN_FRAC

__all__ = ["ALGO", "GpuDqnConfig"]

ALGO = "dqn-gpu"
"""The ``algo`` of this task's runs and policy manifests."""

_ACTIVATIONS = ("relu", "tanh")


@dataclass(frozen=True)
class GpuDqnConfig(Config):
    """An online DQN run on the GPU-type assignment environment."""

    label: ClassVar[str] = ALGO

    seed: int = 1
    """Seed of the weights, the exploration, minibatch sampling and the episodes' windows."""
    steps: int = 50_000
    """Environment steps: decisions with a real choice of GPU type (``--steps``)."""
    idle_weight: float = 1.0
    """lambda of the ADLRO reward (``--lambda``): one idle GPU-second weighs as much as
    ``idle_weight`` seconds of job completion time (see :mod:`hpcpolicy.hetero.reward`)."""
    reward_scale_s: float | None = None
    """Seconds the reward is divided by; None: the mean logged run time of the training
    part's jobs (computed when the run starts, recorded in config.json and the manifest)."""
    window_size: int = 256
    """Consecutive jobs per episode."""
    train_frac: float = TRAIN_FRAC
    """Episodes are windows of the first ``train_frac`` of the jobs (the rest is left for
    evaluation, as in ``hpcpolicy evaluate``)."""
    backfill: str = choice("none", BACKFILL_MODES)
    """Backfilling of the engine (none, easy, conservative); the queue order is FCFS."""
    double: bool = True
    """Double DQN (d3rlpy DoubleDQN) rather than DQN."""
    gamma: float = 0.95
    """Discount factor per decision (0.95 did better than 0.99 on the load-scaled HPC2N GPU
    jobs: a placement's effect fades within tens of decisions)."""
    learning_rate: float = 3e-4
    """Adam learning rate."""
    batch_size: int = 64
    """Transitions per gradient step."""
    buffer_size: int = 100_000
    """Transitions the FIFO replay buffer keeps."""
    update_start: int = 1_000
    """Environment steps before the first gradient step."""
    update_interval: int = 1
    """Environment steps per gradient step."""
    target_update_interval: int = 1_000
    """Gradient steps between target-network copies."""
    epsilon_start: float = 1.0
    """Share of random (valid) actions at the start."""
    epsilon_end: float = 0.05
    """Share of random (valid) actions after ``epsilon_steps``."""
    epsilon_steps: int = 20_000
    """Environment steps over which epsilon decays linearly."""
    hidden: tuple[int, ...] = (64, 64)
    """Hidden widths of the Q-network (an MLP from the observation to one Q per GPU type)."""
    activation: str = choice("relu", _ACTIVATIONS)
    """relu or tanh."""
    steps_per_epoch: int = 5_000
    """Environment steps per epoch: one row of d3rlpy's logs and one checkpoint."""
    torch_threads: int = 1
    """Intra-op threads."""

    def validate(self) -> None:
        self._at_least(1, "steps", "window_size", "batch_size", "buffer_size", "update_interval",
                       "target_update_interval", "epsilon_steps", "steps_per_epoch",
                       "torch_threads")
        self._at_least(0, "update_start", "seed")
        self._require(self.idle_weight >= 0, "idle_weight",
                      f"lambda must be >= 0, got {self.idle_weight}")
        self._require(self.reward_scale_s is None or self.reward_scale_s > 0, "reward_scale_s",
                      f"must be > 0 seconds or null, got {self.reward_scale_s}")
        self._require(0.0 < self.train_frac < 1.0, "train_frac",
                      f"must be in (0, 1), got {self.train_frac}")
        self._require(self.learning_rate > 0, "learning_rate",
                      f"must be > 0, got {self.learning_rate}")
        for name in ("gamma", "epsilon_start", "epsilon_end"):
            value = getattr(self, name)
            self._require(0.0 <= value <= 1.0, name, f"must be in [0, 1], got {value}")
        self._require(len(self.hidden) >= 1 and min(self.hidden) >= 1, "hidden",
                      f"must be one or more positive integers, got {list(self.hidden)}")

    # -- computed at runtime ---------------------------------------------------------------
    @property
    def epoch_steps(self) -> int:
        """Environment steps per epoch: ``steps_per_epoch``, or ``steps`` when fewer."""
        return min(self.steps_per_epoch, self.steps)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (``algo`` included)."""
        return {"algo": ALGO, **super().to_dict()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        """Rebuild from :meth:`to_dict` output (or a ``--config`` file plus flags).

        Raises:
            ConfigError: Unknown fields (listing the valid ones), or a value of the wrong
                type or out of range.
        """
        if isinstance(data, Mapping) and data.get("algo") in (ALGO, "dqn"):
            data = {k: v for k, v in data.items() if k != "algo"}
        return super().from_dict(data)
