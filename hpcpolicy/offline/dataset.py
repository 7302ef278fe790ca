"""Build a replay dataset: episodes from the log and from rollouts, on chronological windows.

The workload is cut as the environment cuts it (:mod:`hpcpolicy.world.split`): windows of
``window_size`` consecutive jobs, side by side, in the first ``train_frac`` of the jobs (the
latest ``val_frac`` of them are the *validation* split, the others *train*) and in the rest
(*test*). No window straddles the cut, so the test windows are never seen in training. Every
window gets one episode per source (:meth:`DatasetConfig.sources
<hpcpolicy.offline.config.DatasetConfig.sources>`): the logged decisions
(:mod:`hpcpolicy.offline.logged`) and rollouts (:mod:`hpcpolicy.offline.rollouts`).

Example:
    >>> dataset_windows(1000, DatasetConfig(window_size=100, val_frac=0.2))
    {'train': (0, 100, 200, 300, 400), 'validation': (500, 600), 'test': (700, 800, 900)}
"""

from __future__ import annotations

import concurrent.futures
import math
import multiprocessing
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from hpcpolicy.errors import ConfigError
from hpcpolicy.offline.config import DatasetConfig
from hpcpolicy.offline.logged import LOGGED, LoggedDecisions
from hpcpolicy.offline.rollouts import Rollouts
from hpcpolicy.world.split import part_range

if TYPE_CHECKING:
    from hpcpolicy.cluster import ClusterSpec
    from hpcpolicy.offline.layout import Episode
    from hpcpolicy.workload import Workload

__all__ = ["SPLIT_NAMES", "BuiltDataset", "build_dataset", "dataset_windows"]

SPLIT_NAMES = ("train", "validation", "test")
"""The splits of a dataset, in chronological order."""

Step = Callable[[str, int, int], None]


def _side_by_side(lo: int, hi: int, size: int, at_most: int | None) -> list[int]:
    """Starts of the windows that fit side by side in jobs ``[lo, hi)``, at most
    ``at_most`` of them spread evenly."""
    starts = list(range(lo, hi - size + 1, size))
    if at_most is not None and len(starts) > at_most:
        keep = np.unique(np.linspace(0, len(starts) - 1, at_most).round().astype(int))
        starts = [starts[i] for i in keep]
    return starts


def dataset_windows(n_jobs: int, cfg: DatasetConfig) -> dict[str, tuple[int, ...]]:
    """The window starts of each split (0-based job indices into the whole workload).

    Raises:
        ConfigError: The training or the test part holds no whole window.
    """
    out: dict[str, list[int]] = {}
    for part in ("train", "test"):
        lo, hi = part_range(n_jobs, part, cfg.train_frac)
        out[part] = _side_by_side(lo, hi, cfg.window_size, cfg.max_windows)
        if not out[part]:
            raise ConfigError(f"the {part} part holds {hi - lo} jobs (of {n_jobs}, train_frac "
                              f"{cfg.train_frac}), fewer than one window of {cfg.window_size}; "
                              "use a smaller --window-size")
    train = out["train"]
    n_val = min(math.ceil(cfg.val_frac * len(train)), len(train) - 1) if cfg.val_frac else 0
    return {"train": tuple(train[:len(train) - n_val]),
            "validation": tuple(train[len(train) - n_val:]), "test": tuple(out["test"])}


@dataclass
class BuiltDataset:
    """Episodes of every split, and what was left out."""

    config: DatasetConfig
    windows: dict[str, tuple[int, ...]]
    """Window starts per split."""
    episodes: dict[str, list[Episode]]
    """Episodes per split, window by window, sources in :meth:`DatasetConfig.sources` order."""
    skipped: dict[str, int] = field(default_factory=dict)
    """Windows without an episode, by source (logged: a job without a logged start;
    rollouts: no job fits the machine)."""

    @property
    def steps(self) -> int:
        """Decisions over all splits."""
        return sum(len(e) for eps in self.episodes.values() for e in eps)


_WORKER: dict[str, Any] = {}
"""What a build worker process uses (set before the pool forks, inherited by the workers)."""


def _window_episodes(start: int) -> list[Episode | None]:
    """One episode per source for the window at ``start`` (None: skipped)."""
    logged: LoggedDecisions | None = _WORKER["logged"]
    rollouts: Rollouts = _WORKER["rollouts"]
    return [logged.episode(start) if source == LOGGED and logged is not None
            else rollouts.episode(start, source) for source in _WORKER["sources"]]


def _episodes_in_order(starts: list[int], workers: int) -> Iterator[list[Episode | None]]:
    """:func:`_window_episodes` of each start, in order, in ``workers`` processes."""
    if workers == 1 or len(starts) < 2:
        yield from map(_window_episodes, starts)
        return
    context = multiprocessing.get_context("fork")
    with concurrent.futures.ProcessPoolExecutor(workers, mp_context=context) as pool:
        yield from pool.map(_window_episodes, starts, chunksize=4)


def build_dataset(workload: Workload, cluster: ClusterSpec, cfg: DatasetConfig, *,
                  on_step: Step | None = None, workers: int = 1) -> BuiltDataset:
    """Every episode of the dataset ``cfg`` describes.

    Args:
        workload: The whole workload (windows index into it).
        cluster: The machine.
        cfg: Source, windows, environment and seed.
        on_step: Progress: ``on_step(label, windows done, windows in all)``.
        workers: Processes that build windows in parallel (forked; POSIX only). The
            episodes do not depend on it: every random draw is seeded per window and source.

    Raises:
        ConfigError: No whole window in a part; a logged source on a log without start
            times; a split left without any episode; ``workers`` < 1.
    """
    if workers < 1:
        raise ConfigError(f"workers must be >= 1, not {workers}")
    env = cfg.env_config()
    has_starts = bool((workload.logged_start >= 0).any())
    if cfg.source == "logged" and not has_starts:
        LoggedDecisions(workload, cluster, env)  # raises the explanation
    sources = cfg.sources(logged=has_starts)
    _WORKER.update(
        logged=(LoggedDecisions(workload, cluster, env, cfg.logged_action)
                if LOGGED in sources else None),
        rollouts=Rollouts(workload, cluster, env, seed=cfg.seed, epsilon=cfg.epsilon),
        sources=sources)
    windows = dataset_windows(len(workload), cfg)
    tasks = [(split, start) for split in SPLIT_NAMES for start in windows[split]]
    episodes: dict[str, list[Episode]] = {name: [] for name in SPLIT_NAMES}
    skipped = dict.fromkeys(sources, 0)
    try:
        results = _episodes_in_order([start for _, start in tasks], workers)
        for done, ((split, _), found) in enumerate(zip(tasks, results, strict=True), 1):
            for source, ep in zip(sources, found, strict=True):
                if ep is None or len(ep) == 0:
                    skipped[source] += 1
                else:
                    episodes[split].append(ep)
            if on_step is not None:
                on_step(split, done, len(tasks))
    finally:
        _WORKER.clear()
    for split in SPLIT_NAMES:
        if windows[split] and not episodes[split]:
            counts = ", ".join(f"{s}: {n} skipped" for s, n in skipped.items())
            raise ConfigError(f"the {split} split has {len(windows[split])} window(s) but no "
                              f"episode ({counts}); check that the log records start times, "
                              "or use another source")
    return BuiltDataset(cfg, windows, episodes, skipped)
