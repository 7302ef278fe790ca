"""The validation part a tune scores its members on, carved from the end of the training part.

The chronological split (:mod:`hpcpolicy.world.split`) has a training part and a test part.
Choosing between members on the test part would leak it into the choice, so a tune cuts the
training part once more: members train on its first ``1 - val_frac`` (the environment's
``train_frac`` becomes ``train_frac * (1 - val_frac)``, to 12 decimals), and the jobs from
there to the end of the training part are the *validation* part. Every round, each member's
current policy is replayed on the same ``val_windows`` windows of that part, with the
environment's backfilling and engine options, by :func:`hpcpolicy.evaluate.evaluate`; its
score is the mean bounded slowdown over the windows (lower is better). The test part stays
unseen, for ``hpcpolicy evaluate``.

Example:
    >>> from hpcpolicy.env.config import EnvConfig
    >>> from hpcpolicy.tune.config import TuneConfig
    >>> v = carve(1000, EnvConfig(window_size=50), TuneConfig(val_window_size=50, val_windows=2))
    >>> v.jobs, v.train_frac, all(560 <= s <= 700 - 50 for s in v.starts)
    ((560, 700), 0.56, True)
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from hpcpolicy.errors import ConfigError
from hpcpolicy.evaluate import EvaluateConfig, evaluate
from hpcpolicy.sim.windows import WindowConfig, choose_starts
from hpcpolicy.world.split import part_range

if TYPE_CHECKING:
    from hpcpolicy.cluster import ClusterSpec
    from hpcpolicy.env.config import EnvConfig
    from hpcpolicy.tune.config import TuneConfig
    from hpcpolicy.workload import Workload

__all__ = ["Validation", "carve"]

_VALIDATION_STREAM = 2
"""Key of the validation windows' seed, derived from the tune seed."""


@dataclass(frozen=True)
class Validation:
    """The validation windows and how members are replayed on them."""

    env: EnvConfig
    """The environment members train in (its ``train_frac`` ends before the validation part)."""
    jobs: tuple[int, int]
    """Job indices ``[lo, hi)`` of the validation part."""
    starts: tuple[int, ...]
    """First job of each validation window."""
    window_size: int
    """Jobs per window."""

    @property
    def train_frac(self) -> float:
        """The members' ``train_frac``: where their training part ends."""
        return self.env.train_frac

    def score(self, workload: Workload, cluster: ClusterSpec, policies: Sequence[str], *,
              on_step: Callable[[str, int, int], None] | None = None) -> list[float]:
        """Mean bounded slowdown of each policy (a directory or a heuristic name) on the
        validation windows; NaN where it has none."""
        env = self.env
        cfg = EvaluateConfig(policies=tuple(policies), backfills=(env.backfill,),
                             window_size=self.window_size, split="all", starts=self.starts,
                             warm=env.warm, compat=env.compat, kill_at_limit=env.kill_at_limit,
                             exclusive_nodes=env.exclusive_nodes,
                             deployed=False)  # one run per policy: the raw ones, in order
        runs = evaluate(workload, cluster, cfg, on_step=on_step).runs
        return [math.nan if run.summary["mean_bsld"] is None else float(run.summary["mean_bsld"])
                for run in runs]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (for tune.json)."""
        return {"jobs": list(self.jobs), "starts": list(self.starts),
                "window_size": self.window_size, "train_frac": self.train_frac,
                "backfill": self.env.backfill, "warm": self.env.warm}


def carve(n_jobs: int, env: EnvConfig, cfg: TuneConfig) -> Validation:
    """The validation part of a workload of ``n_jobs`` jobs and its windows.

    Args:
        n_jobs: Jobs in the workload.
        env: The environment as configured: split ``train``, ``train_frac`` the test cut.
        cfg: ``val_frac``, ``val_windows``, ``val_window_size`` and ``seed``.

    Raises:
        ConfigError: A split other than train, or a validation part too small for a window.
    """
    from hpcpolicy.learn.seeding import derive_seed

    if env.split != "train":
        raise ConfigError(f"a tune trains on the train part, not split {env.split!r}: the "
                          "validation part is cut from its end")
    # rounded so that 0.7 * 0.8 is 0.56, not 0.5599999999999999 (one job fewer)
    members = dataclasses.replace(env, train_frac=round(env.train_frac * (1 - cfg.val_frac), 12))
    lo = part_range(n_jobs, "train", members.train_frac)[1]
    hi = part_range(n_jobs, "train", env.train_frac)[1]
    if hi - lo < cfg.val_window_size + cfg.val_windows - 1:
        raise ConfigError(f"the validation part (the last --val-frac {cfg.val_frac} of the "
                          f"training part: jobs {lo}..{hi - 1}) holds {hi - lo} jobs, too few "
                          f"for {cfg.val_windows} distinct window(s) of {cfg.val_window_size}; "
                          "use a larger --val-frac, fewer or smaller validation windows")
    windows = WindowConfig(size=cfg.val_window_size, count=cfg.val_windows,
                           seed=derive_seed(cfg.seed, _VALIDATION_STREAM))
    starts = tuple(lo + s for s in choose_starts(hi - lo, windows))
    return Validation(env=members, jobs=(lo, hi), starts=starts, window_size=cfg.val_window_size)
