"""Chronological train/test split of a workload, and the windows each part offers.

The jobs, in submit order, are cut once: the first ``train_frac`` of them (``floor(train_frac
* n)`` jobs) are the *training* part, the rest the *test* part. A window of consecutive jobs
belongs to a part only if all its jobs do, so every training window ends before the first
test job is submitted: a policy is always evaluated on a later period than it learned from,
as it would be deployed. ``all`` ignores the cut (RLScheduler's protocol samples training and
test windows from the whole trace).

A warm window's pre-load is replayed from the jobs just before it (see
:mod:`hpcpolicy.sim.windows`); for the first test windows those are training jobs. That only
sets the machine's state at the window's start; no test job is ever part of a training window.

The fractions are stated once, in :class:`Split` (:data:`TRAIN_FRAC`, :data:`VAL_FRAC`);
every command's ``--train-frac`` / ``--fit-frac`` / ``--val-frac`` defaults to them.

Example:
    >>> part_range(1000, "train", TRAIN_FRAC), part_range(1000, "test", TRAIN_FRAC)
    ((0, 700), (700, 1000))
    >>> split_starts(1000, "test", TRAIN_FRAC, WindowConfig(size=100, count=3, seed=1))
    (794, 802, 851)
    >>> latest_starts(1000, "train", TRAIN_FRAC, size=100, count=3)
    (400, 500, 600)
    >>> split = Split()
    >>> validation_range(1000, split.train_frac, split.val_frac)
    (600, 700)
    >>> validation_starts(1000, split.train_frac, split.val_frac, size=40, count=9)
    (620, 660)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

from hpcpolicy.config import Config
from hpcpolicy.errors import ConfigError
from hpcpolicy.sim.windows import WindowConfig, choose_starts
from hpcpolicy.world.protocol import SPLITS, TRAIN_FRAC, VAL_FRAC

__all__ = ["SPLITS", "TRAIN_FRAC", "VAL_FRAC", "Split", "fit_frac", "latest_starts",
           "part_range", "split_starts", "validation_range", "validation_starts", "window_range"]



@dataclass(frozen=True)
class Split(Config):
    """The train / validation / test parts of a log, stated once.

    Example:
        >>> Split(), Split.from_dict({"train_frac": 0.5}).val_frac
        (Split(train_frac=0.7, val_frac=0.1), 0.1)
    """

    label: ClassVar[str] = "split"

    train_frac: float = TRAIN_FRAC
    """Share of the jobs, earliest first, in the training part (validation included)."""
    val_frac: float = VAL_FRAC
    """Share of all the jobs, the last of the training part, kept for validation."""

    def validate(self) -> None:
        self._require(0.0 < self.train_frac < 1.0, "train_frac",
                      f"must be in (0, 1), got {self.train_frac}")
        self._require(0.0 <= self.val_frac < self.train_frac, "val_frac",
                      f"must be in [0, train_frac={self.train_frac:g}), got {self.val_frac}")


def part_range(n_jobs: int, split: str, train_frac: float) -> tuple[int, int]:
    """Job indices ``[lo, hi)`` of part ``split`` of a workload of ``n_jobs`` jobs.

    Raises:
        ConfigError: Unknown split, ``train_frac`` outside (0, 1), or an empty part.
    """
    if split not in SPLITS:
        raise ConfigError(f"split {split!r} is not one of {', '.join(SPLITS)}")
    if not 0.0 < train_frac < 1.0:
        raise ConfigError(f"train_frac must be in (0, 1), not {train_frac}")
    cut = math.floor(train_frac * n_jobs)
    lo, hi = {"train": (0, cut), "test": (cut, n_jobs), "all": (0, n_jobs)}[split]
    if hi <= lo:
        raise ConfigError(f"the {split} part of {n_jobs} jobs with train_frac {train_frac} is "
                          "empty; use a larger job table or another train_frac")
    return lo, hi


def window_range(n_jobs: int, split: str, train_frac: float, size: int) -> tuple[int, int]:
    """First and last possible start of a ``size``-job window inside part ``split``.

    Raises:
        ConfigError: The part holds fewer than ``size`` jobs.
    """
    lo, hi = part_range(n_jobs, split, train_frac)
    if hi - lo < size:
        raise ConfigError(f"the {split} part holds {hi - lo} jobs (of {n_jobs}, train_frac "
                          f"{train_frac}), fewer than one window of {size}; use smaller windows")
    return lo, hi - size


def split_starts(n_jobs: int, split: str, train_frac: float,
                windows: WindowConfig) -> tuple[int, ...]:
    """Window starts (0-based job indices into the whole workload) inside part ``split``.

    Random windows are drawn as :func:`hpcpolicy.sim.windows.choose_starts` draws them, within
    the part; explicit ``windows.starts`` are checked to lie inside it.

    Raises:
        ConfigError: Too few jobs in the part, or explicit starts outside it.
    """
    first, last = window_range(n_jobs, split, train_frac, windows.size)
    if windows.starts is not None:
        outside = [s for s in windows.starts if not first <= s <= last]
        if outside:
            raise ConfigError(f"window start(s) {outside} are not inside the {split} part "
                              f"(windows of {windows.size} jobs start at {first}..{last}); "
                              "use --split all to evaluate anywhere")
        return tuple(int(s) for s in windows.starts)
    local = choose_starts(last - first + windows.size, windows)
    return tuple(first + s for s in local)


def latest_starts(n_jobs: int, split: str, train_frac: float, *, size: int,
                  count: int) -> tuple[int, ...]:
    """Starts of the ``count`` latest side-by-side ``size``-job windows of part ``split``, the
    last one ending at the part's end (fewer when the part holds fewer), oldest first.

    For choosing among policies on the training part: its latest jobs are the nearest in time
    to the period a policy is deployed on.

    Raises:
        ConfigError: The part holds fewer than ``size`` jobs, or ``count`` < 1.
    """
    if count < 1:
        raise ConfigError(f"count must be >= 1, not {count}")
    first, last = window_range(n_jobs, split, train_frac, size)
    return _back_to_back(first, last, size, count)


def _back_to_back(first: int, last: int, size: int, count: int) -> tuple[int, ...]:
    """Starts of up to ``count`` side-by-side windows, the latest starting at ``last``, none
    before ``first``, oldest first."""
    return tuple(range(last, first - 1, -size))[:count][::-1]


def fit_frac(train_frac: float, val_frac: float) -> float:
    """The share of the jobs training episodes come from: the training part less its last
    ``val_frac`` of all jobs, kept for validation.

    Raises:
        ConfigError: ``val_frac`` outside [0, ``train_frac``).
    """
    if not 0.0 <= val_frac < train_frac:
        raise ConfigError(f"val_frac must be in [0, train_frac={train_frac:g}), not {val_frac:g}"
                          "; it is the share of all jobs, just before the test part, kept out "
                          "of training to choose and guard the policy")
    return round(train_frac - val_frac, 12)  # 0.7 - 0.3 is 0.3999..., which floors a job short


def validation_range(n_jobs: int, train_frac: float, val_frac: float) -> tuple[int, int]:
    """Job indices ``[lo, hi)`` of the validation part: the last ``val_frac`` of the jobs
    before the test part, after every training episode and before every test window."""
    return (math.floor(fit_frac(train_frac, val_frac) * n_jobs),
            math.floor(train_frac * n_jobs))


def validation_starts(n_jobs: int, train_frac: float, val_frac: float, *, size: int,
                      count: int) -> tuple[int, ...]:
    """Starts of up to ``count`` side-by-side ``size``-job windows inside the validation part,
    the last one ending at its end, oldest first.

    Raises:
        ConfigError: The validation part holds fewer than ``size`` jobs, or ``count`` < 1.
    """
    if count < 1:
        raise ConfigError(f"count must be >= 1, not {count}")
    lo, hi = validation_range(n_jobs, train_frac, val_frac)
    if hi - lo < size:
        raise ConfigError(f"the validation part holds {hi - lo} jobs (of {n_jobs}, val_frac "
                          f"{val_frac:g}), fewer than one window of {size}; raise --val-frac or "
                          "use smaller windows")
    return _back_to_back(lo, hi - size, size, count)
