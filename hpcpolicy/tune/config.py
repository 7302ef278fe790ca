"""``TuneConfig``: the population, its rounds, its selection rule and its validation windows.

Example:
    >>> cfg = TuneConfig(population=4, total_steps=50_000, interval=20_000)
    >>> cfg.rounds, [cfg.round_steps(r) for r in (1, 2, 3)]
    (3, [20000, 40000, 50000])
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

from hpcpolicy.config import Config
from hpcpolicy.errors import ConfigError

__all__ = ["TuneConfig"]


@dataclass(frozen=True)
class TuneConfig(Config):
    """Population-based training of PPO / DD-PPO runs (``hpcpolicy tune``)."""

    label: ClassVar[str] = "tune"

    population: int = 4
    """Members trained side by side (``--population``); at least 2."""
    total_steps: int = 200_000
    """Environment steps of each member, all its workers together (``--steps``)."""
    interval: int = 20_000
    """Steps each member trains per round, between two exploit/explore steps
    (``--interval``); the last round trains what is left of ``total_steps``."""
    seed: int = 1
    """Seed of the whole tune: member seeds, initial hyperparameters, every exploit/explore
    draw and the validation windows."""
    workers: int = 1
    """DD-PPO worker processes per member (1 with PPO)."""
    quantile: float = 0.25
    """Share of the population replaced after each round, and copied from (at most 0.5)."""
    factors: tuple[float, float] = (0.8, 1.25)
    """Multipliers of the explore step, one drawn per hyperparameter."""
    init_spread: float = 2.0
    """Initial hyperparameters of members 1.. lie log-uniformly within base / spread ..
    base * spread (1 = every member starts from the base config, differing only by seed)."""
    val_frac: float = 0.2
    """Share of the training part, at its end, held out to score members (``--val-frac``);
    members train on the jobs before it."""
    val_windows: int = 5
    """Validation windows (``--val-windows``), the same ones every round."""
    val_window_size: int = 256
    """Jobs per validation window (``--val-window-size``)."""

    def validate(self) -> None:
        def check(ok: bool, option: str, message: str) -> None:
            if not ok:
                raise ConfigError(f"{option} {message}")

        check(self.population >= 2, f"--population {self.population}:",
              "population-based training needs at least 2 members")
        check(self.total_steps >= 1, f"--steps {self.total_steps}:", "must be >= 1")
        check(self.interval >= 1, f"--interval {self.interval}:", "must be >= 1")
        check(self.interval <= self.total_steps, f"--interval {self.interval}",
              f"is larger than --steps {self.total_steps}: members would never be compared "
              "before the end; give an interval of at most the steps (e.g. a tenth of them)")
        check(self.seed >= 0, f"--seed {self.seed}:", "must be >= 0")
        check(self.workers >= 1, f"--workers {self.workers}:", "must be >= 1")
        check(0.0 < self.quantile <= 0.5, f"quantile {self.quantile}:", "must be in (0, 0.5]")
        check(len(self.factors) == 2 and all(f > 0 for f in self.factors),
              f"factors {self.factors}:", "must be two positive multipliers")
        check(self.init_spread >= 1.0, f"init_spread {self.init_spread}:", "must be >= 1")
        check(0.0 < self.val_frac < 1.0, f"--val-frac {self.val_frac}:", "must be in (0, 1)")
        check(self.val_windows >= 1, f"--val-windows {self.val_windows}:", "must be >= 1")
        check(self.val_window_size >= 1, f"--val-window-size {self.val_window_size}:",
              "must be >= 1")

    # -- computed at runtime ---------------------------------------------------------------
    @property
    def rounds(self) -> int:
        """Rounds of training: ``ceil(total_steps / interval)``."""
        return math.ceil(self.total_steps / self.interval)

    def round_steps(self, round_: int) -> int:
        """Steps every member has trained at the end of round ``round_`` (1-based)."""
        return min(round_ * self.interval, self.total_steps)
