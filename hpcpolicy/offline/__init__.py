"""Offline RL: replay datasets from the logs and from rollouts, d3rlpy training, export.

The cluster's own history is a dataset of the real scheduler's decisions; offline RL learns
from it (and from simulator rollouts) without touching production. Nothing here imports
d3rlpy at package import; the modules that need it import it on demand and quietly
(:mod:`~hpcpolicy.offline.quiet`).

Modules:

* :mod:`~hpcpolicy.offline.config`: :class:`DatasetConfig` and :class:`OfflineConfig`;
* :mod:`~hpcpolicy.offline.layout`: the flat observation vector and the episode container;
* :mod:`~hpcpolicy.offline.logged`: the logged decisions, rebuilt from the log;
* :mod:`~hpcpolicy.offline.rollouts`: heuristic, epsilon-random and random rollouts;
* :mod:`~hpcpolicy.offline.dataset`: windows, splits and the build;
* :mod:`~hpcpolicy.offline.store`: the dataset directory (d3rlpy dumps + manifest);
* :mod:`~hpcpolicy.offline.networks`: d3rlpy models around the per-slot scorer, masked;
* :mod:`~hpcpolicy.offline.train`: d3rlpy training and the policy export;
* :mod:`~hpcpolicy.offline.finetune`: PPO from the offline weights.

Example:
    >>> from hpcpolicy.offline import OFFLINE_ALGOS
    >>> sorted(OFFLINE_ALGOS)
    ['bc', 'bcq', 'cql', 'dqn']
"""

from __future__ import annotations

from hpcpolicy.offline.config import OFFLINE_ALGOS, SOURCES, DatasetConfig, OfflineConfig

__all__ = ["OFFLINE_ALGOS", "SOURCES", "DatasetConfig", "OfflineConfig"]
