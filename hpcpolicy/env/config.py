"""``EnvConfig``: everything that defines the scheduling environment's episodes and rewards."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from hpcpolicy.compat import COMPAT_NAMES
from hpcpolicy.config import Config, choice
from hpcpolicy.env.prior import PRIORS
from hpcpolicy.env.rewards import parse_reward
from hpcpolicy.env.spaces import DEFAULT_K
from hpcpolicy.sim.types import BACKFILL_MODES, RunLimits, SimConfig
from hpcpolicy.world.protocol import SPLITS, TRAIN_FRAC

__all__ = ["EnvConfig"]


@dataclass(frozen=True)
class EnvConfig(Config):
    """Episodes, engine options and reward of :class:`~hpcpolicy.env.scheduling.SchedulingEnv`.

    JSON-ready (:meth:`to_dict` / :meth:`from_dict`), so that a DD-PPO worker or a resumed run
    rebuilds the identical environment.

    Example:
        >>> cfg = EnvConfig(window_size=128, backfill="easy", reward="bsld:1,utilization:50")
        >>> EnvConfig.from_dict(cfg.to_dict()) == cfg, cfg.sim_config().backfill
        (True, 'easy')
    """

    label: ClassVar[str] = "env"

    k: int = DEFAULT_K
    """Job slots the policy sees (the oldest ``k`` waiting jobs)."""
    window_size: int = 256
    """Consecutive jobs per episode."""
    reward: str = "bsld"
    """Reward terms and weights, ``name[:weight]`` comma-separated (see
    :mod:`hpcpolicy.env.rewards`)."""
    backfill: str = choice("none", BACKFILL_MODES)
    """Backfilling after each head choice: none, easy or conservative (as in ``simulate``)."""
    split: str = choice("train", SPLITS)
    """Part of the workload episodes are drawn from: train, test or all
    (:mod:`hpcpolicy.world.split`)."""
    train_frac: float = TRAIN_FRAC
    """Share of the jobs (earliest first) in the training part."""
    warm: bool = False
    """Start each episode with the jobs running at its first submit (see
    :mod:`hpcpolicy.sim.windows`) instead of an empty machine."""
    warmup_jobs: int | None = None
    """Jobs before the window replayed to find what runs (warm only); default the window size."""
    compat: str | None = choice(None, COMPAT_NAMES)
    """Engine semantics of a peer (``rlscheduler``) instead of the project's own."""
    kill_at_limit: bool = False
    """End a job at its requested walltime when its logged run time is longer."""
    exclusive_nodes: bool = False
    """Jobs occupy whole nodes (RLScheduler's machine model)."""
    user_jobs: int = 0
    """Running jobs per user a site model allows (``--site``); 0 = no limit."""
    user_cores: int = 0
    """Running cores per user a site model allows; 0 = no limit."""
    pools: tuple[tuple[str, tuple[str, ...]], ...] = ()
    """Partitions confined to node groups by a site model (``SimConfig.pools``)."""
    prior: str | None = choice(None, PRIORS)
    """Heuristic whose order fills the slots and follows the chosen head, the policy's starting
    point (:mod:`hpcpolicy.env.prior`); None: the oldest ``k`` in submit order."""
    baselines: tuple[str, ...] = ("fcfs", "sjf", "f1")
    """Heuristics replayed on each finished episode's window; the best one's bounded slowdown
    is reported in ``info["episode_metrics"]`` (empty: none, which is faster)."""

    def validate(self) -> None:
        from hpcpolicy.policies import policy_names

        self._at_least(1, "k", "window_size")
        self._at_least(0, "warmup_jobs")
        parse_reward(self.reward)
        self._require(0.0 < self.train_frac < 1.0, "train_frac",
                      f"must be in (0, 1), got {self.train_frac}")
        unknown = [b for b in self.baselines if b not in policy_names()]
        self._require(not unknown, "baselines", f"{unknown} are not heuristics; valid: "
                      f"{', '.join(policy_names())}")
        self.sim_config()  # checks the engine options together

    def sim_config(self, policy: str = "fcfs") -> SimConfig:
        """The engine options of an episode (``policy`` matters only for baselines)."""
        return SimConfig(policy=policy, backfill=self.backfill, kill_at_limit=self.kill_at_limit,
                         compat=self.compat, exclusive_nodes=self.exclusive_nodes,
                         limits=RunLimits(self.user_jobs, self.user_cores), pools=self.pools)

    @property
    def reward_weights(self) -> dict[str, float]:
        """The parsed :attr:`reward`."""
        return parse_reward(self.reward)
