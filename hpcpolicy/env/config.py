"""``EnvConfig``: everything that defines the scheduling environment's episodes and rewards."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from hpcpolicy.env.rewards import parse_reward
from hpcpolicy.env.spaces import DEFAULT_K
from hpcpolicy.env.split import SPLITS
from hpcpolicy.errors import ConfigError
from hpcpolicy.sim.types import RunLimits, SimConfig

__all__ = ["EnvConfig"]


@dataclass(frozen=True)
class EnvConfig:
    """Episodes, engine options and reward of :class:`~hpcpolicy.env.scheduling.SchedulingEnv`.

    JSON-ready (:meth:`to_dict` / :meth:`from_dict`), so that a DD-PPO worker or a resumed run
    rebuilds the identical environment.

    Example:
        >>> cfg = EnvConfig(window_size=128, backfill="easy", reward="bsld:1,utilization:50")
        >>> EnvConfig.from_dict(cfg.to_dict()) == cfg, cfg.sim_config().backfill
        (True, 'easy')
    """

    k: int = DEFAULT_K
    """Job slots the policy sees (the oldest ``k`` waiting jobs)."""
    window_size: int = 256
    """Consecutive jobs per episode."""
    reward: str = "bsld"
    """Reward terms and weights, ``name[:weight]`` comma-separated (see
    :mod:`hpcpolicy.env.rewards`)."""
    backfill: str = "none"
    """Backfilling after each head choice: none, easy or conservative (as in ``simulate``)."""
    split: str = "train"
    """Part of the workload episodes are drawn from: train, test or all
    (:mod:`hpcpolicy.env.split`)."""
    train_frac: float = 0.7
    """Share of the jobs (earliest first) in the training part."""
    warm: bool = False
    """Start each episode with the jobs running at its first submit (see
    :mod:`hpcpolicy.sim.windows`) instead of an empty machine."""
    warmup_jobs: int | None = None
    """Jobs before the window replayed to find what runs (warm only); default the window size."""
    compat: str | None = None
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
    baselines: tuple[str, ...] = ("fcfs", "sjf", "f1")
    """Heuristics replayed on each finished episode's window; the best one's bounded slowdown
    is reported in ``info["episode_metrics"]`` (empty: none, which is faster)."""

    def __post_init__(self) -> None:
        from hpcpolicy.policies import policy_names

        if self.k < 1:
            raise ConfigError(f"env k must be >= 1 slot, not {self.k}")
        if self.window_size < 1:
            raise ConfigError(f"env window_size must be >= 1 job, not {self.window_size}")
        parse_reward(self.reward)
        if self.split not in SPLITS:
            raise ConfigError(f"env split {self.split!r} is not one of {', '.join(SPLITS)}")
        if not 0.0 < self.train_frac < 1.0:
            raise ConfigError(f"env train_frac must be in (0, 1), not {self.train_frac}")
        if self.warmup_jobs is not None and self.warmup_jobs < 0:
            raise ConfigError(f"env warmup_jobs must be >= 0, not {self.warmup_jobs}")
        unknown = [b for b in self.baselines if b not in policy_names()]
        if unknown:
            raise ConfigError(f"env baselines {unknown} are not heuristics; valid: "
                              f"{', '.join(policy_names())}")
        self.sim_config()  # checks backfill and compat

    def sim_config(self, policy: str = "fcfs") -> SimConfig:
        """The engine options of an episode (``policy`` matters only for baselines)."""
        return SimConfig(policy=policy, backfill=self.backfill, kill_at_limit=self.kill_at_limit,
                         compat=self.compat, exclusive_nodes=self.exclusive_nodes,
                         limits=RunLimits(self.user_jobs, self.user_cores), pools=self.pools)

    @property
    def reward_weights(self) -> dict[str, float]:
        """The parsed :attr:`reward`."""
        return parse_reward(self.reward)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        data = dataclasses.asdict(self)
        data["baselines"] = list(self.baselines)
        data["pools"] = [[name, list(groups)] for name, groups in self.pools]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EnvConfig:
        """Rebuild from :meth:`to_dict` output.

        Raises:
            ConfigError: Unknown keys (listing the valid ones) or invalid values.
        """
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise ConfigError(f"env config: unknown field(s) {', '.join(unknown)}; valid: "
                              f"{', '.join(sorted(names))}")
        values = dict(data)
        if "baselines" in values:
            values["baselines"] = tuple(values["baselines"])
        if "pools" in values:
            values["pools"] = tuple((str(name), tuple(groups)) for name, groups in values["pools"])
        return cls(**values)
