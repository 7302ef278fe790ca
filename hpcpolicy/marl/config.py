"""Configuration of the two-agent scheduler: its training (``MarlConfig``) and its episodes
(``MarlEnvConfig``).

``MarlConfig`` is a :class:`~hpcpolicy.ppo.config.DDPPOConfig` (so the DD-PPO worker group,
:class:`~hpcpolicy.ppo.ddppo.TorchDistComm`, takes it as it is) with the fields the second
agent and the shared reward add. Both serialise to JSON and are written into the run
directory; a resumed run must give the same ones.

Example:
    >>> cfg = MarlConfig(total_steps=4096, num_steps=512)
    >>> cfg.algo, MarlConfig.from_dict(cfg.to_dict()) == cfg
    ('marl', True)
    >>> MarlEnvConfig(window_size=128).sim_config().backfill
    'none'
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Self

from hpcpolicy.config import Config, choice
from hpcpolicy.errors import ConfigError
from hpcpolicy.ppo.config import DDPPOConfig
from hpcpolicy.sim.types import BACKFILL_MODES, SimConfig
from hpcpolicy.world.protocol import TRAIN_FRAC
from hpcpolicy.world.split import SPLITS

__all__ = ["MarlConfig", "MarlEnvConfig"]

DEFAULT_K = 32
"""Waiting jobs the selector sees by default (the oldest)."""

UTIL_SPANS = ("started", "queue")
"""Values of ``MarlConfig.util_span``."""


@dataclass(frozen=True)
class MarlConfig(DDPPOConfig):
    """Cooperative PPO of the selector and the allocator (DD-PPO across torchrun workers).

    ``num_steps`` counts decisions of both agents per worker and rollout: a worker plays
    whole episodes until it has at least that many, so a rollout never stops mid-episode.
    ``hidden`` is the selector's scorer, ``allocator_hidden`` the allocator's; both agents'
    value networks use ``value_hidden``.
    """

    algo: ClassVar[str] = "marl"
    label: ClassVar[str] = "marl"

    num_envs: int = 1
    """Always 1: a worker plays its episodes one after another."""
    num_steps: int = 4096
    """Decisions (both agents) a worker collects per rollout, at least; whole episodes."""
    # PPO's defaults moved the two agents' policies very little per update (approximate KL
    # ~5e-5: one decision's share of the shared reward is a small signal in much noise);
    # these, from a first short comparison on a GPU workload (HPC2N's GPU jobs on
    # examples/gpu-partition.toml), move them ~50 times more (KL ~2e-3) and learned faster.
    learning_rate: float = 1e-3
    """Adam learning rate at the start of training."""
    gamma: float = 0.97
    """Discount factor per decision (of either agent)."""
    gae_lambda: float = 0.9
    """Lambda of generalised advantage estimation."""
    num_minibatches: int = 8
    """Minibatches per epoch, for each agent."""
    update_epochs: int = 8
    """Passes over each agent's decisions per update (fewer when ``target_kl`` stops early)."""
    allocator_hidden: tuple[int, ...] = (32, 16)
    """Hidden widths of the allocator's per-candidate scoring MLP."""
    bsld_weight: float = 1.0
    """Weight of the reward term minus the window's mean bounded slowdown."""
    gpu_util_weight: float = 10.0
    """Weight of the reward term the window's GPU utilisation (0..1)."""
    util_span: str = choice("started", UTIL_SPANS)
    """How the reward projects the span of the utilisation term before the window ends: to
    the latest end of the jobs started so far (``started``), or also to now plus the run time
    of each waiting job (``queue``), which charges a long job's wait as it happens
    (:mod:`hpcpolicy.marl.reward`)."""
    warm_start: str = ""
    """A heuristic (``sjf``, ``f1``, ...) whose choices the selector is fitted to before PPO
    starts (:mod:`hpcpolicy.marl.warm_start`); empty: PPO from random weights."""
    warm_start_decisions: int = 20_000
    """Selector decisions of the heuristic each worker records for the warm start, at least
    (whole episodes)."""
    warm_start_steps: int = 3_000
    """Adam steps of the warm start's fit."""
    warm_start_batch: int = 256
    """Decisions per step of the warm start's fit."""
    warm_start_lr: float = 3e-3
    """Adam learning rate of the warm start's fit (a first test on a small GPU partition:
    3,000 steps at 1e-3 copied SJF on 97 % of its decisions, at 3e-3 on 98 %)."""

    def validate(self) -> None:
        super().validate()
        self._require(self.num_envs == 1, "num_envs", "the two-agent scheduler plays one "
                      f"episode at a time per worker; must be 1, got {self.num_envs}")
        self._require(self.sync_frac == 1.0, "sync_frac", "the two-agent scheduler collects "
                      f"whole episodes and has no straggler cut-off; must be 1, got "
                      f"{self.sync_frac}")
        widths = self.allocator_hidden
        self._require(len(widths) >= 1 and min(widths) >= 1, "allocator_hidden",
                      f"must be one or more positive integers, got {list(widths)}")
        self._at_least(0, "bsld_weight", "gpu_util_weight")
        if self.warm_start:
            from hpcpolicy.policies import policy_names

            self._require(self.warm_start in policy_names(), "warm_start",
                          f"{self.warm_start!r} is not a heuristic; valid: "
                          f"{', '.join(policy_names())}")
        self._at_least(1, "warm_start_decisions", "warm_start_steps", "warm_start_batch")
        self._require(self.warm_start_lr > 0, "warm_start_lr",
                      f"must be > 0, got {self.warm_start_lr}")
        self._require(bool(self.bsld_weight or self.gpu_util_weight), "gpu_util_weight",
                      "bsld_weight and gpu_util_weight are both 0: every decision would be "
                      "worth the same; give one a weight")

    @property
    def reward(self) -> dict[str, float]:
        """The shared reward's weights by term (recorded in the policy manifest)."""
        return {"bsld": self.bsld_weight, "gpu_utilization": self.gpu_util_weight}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        """Rebuild from :meth:`to_dict` output (``algo`` must be ``marl`` when given).

        Raises:
            ConfigError: Another algo, unknown keys, or invalid values.
        """
        if isinstance(data, Mapping) and "algo" in data:
            if data["algo"] != cls.algo:
                raise ConfigError(f"config algo is {data['algo']!r}; the two-agent scheduler "
                                  f"needs {cls.algo!r}")
            data = {k: v for k, v in data.items() if k != "algo"}
        return super().from_dict(data)


@dataclass(frozen=True)
class MarlEnvConfig(Config):
    """The episodes of the two-agent scheduler: windows of a GPU workload on a GPU cluster.

    Example:
        >>> MarlEnvConfig.from_dict(MarlEnvConfig(k=16).to_dict()).k
        16
    """

    label: ClassVar[str] = "marl env"

    k: int = DEFAULT_K
    """Waiting jobs the selector sees."""
    visible: str = "oldest"
    """Which ``k`` waiting jobs the selector sees (the oldest, those that fit now, the
    shortest, ...): a rule of :data:`hpcpolicy.marl.features.VISIBLE`."""
    window_size: int = 256
    """Consecutive jobs per episode."""
    backfill: str = choice("none", BACKFILL_MODES)
    """Backfilling around a head that cannot start: none, easy or conservative."""
    split: str = choice("train", SPLITS)
    """Part of the workload episodes are drawn from: train or all (:mod:`hpcpolicy.world.split`)."""
    train_frac: float = TRAIN_FRAC
    """Share of the jobs (earliest first) in the training part."""
    kill_at_limit: bool = False
    """End a job at its requested walltime when its run is longer."""
    baselines: tuple[str, ...] = ("sjf",)
    """Heuristics replayed (with the first-available allocator) on each episode's window, for
    the logged ``env/best_heuristic_bsld``; each costs about a tenth of the training time;
    empty: none."""

    def validate(self) -> None:
        from hpcpolicy.marl.features import VISIBLE
        from hpcpolicy.policies import policy_names

        self._at_least(1, "k", "window_size")
        self._one_of("visible", VISIBLE)
        self._require(self.visible != "extremes" or self.k >= 2, "k", "visible 'extremes' "
                      "shows the k-1 shortest jobs and the longest: k must be >= 2, not "
                      f"{self.k}")
        self._require(0.0 < self.train_frac < 1.0, "train_frac",
                      f"must be in (0, 1), got {self.train_frac}")
        unknown = [b for b in self.baselines if b not in policy_names()]
        self._require(not unknown, "baselines", f"{unknown} are not heuristics; valid: "
                      f"{', '.join(policy_names())}")

    def sim_config(self, policy: str = "fcfs", allocator: str = "first-available") -> SimConfig:
        """The engine options of an episode (``policy`` and ``allocator`` matter only for the
        baselines; the agents choose jobs and placements themselves)."""
        return SimConfig(policy=policy, backfill=self.backfill, allocator=allocator,
                         kill_at_limit=self.kill_at_limit)
