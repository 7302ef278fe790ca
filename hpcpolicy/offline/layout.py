"""The flat observation vector of offline datasets, and the episodes they are made of.

d3rlpy stores one observation per step as a flat ``float32`` vector. hpcpolicy's observation
(:mod:`hpcpolicy.env.spaces`) is a dict of the K slots' job features, the cluster features and
the validity mask; it is stored as their concatenation::

    [ jobs (K x Fj, row by row) | cluster (Fc) | mask (K, 1.0 / 0.0) ]

so ``len = K * (Fj + 1) + Fc`` (263 for K = 32). The mask travels with the observation because
d3rlpy has no action masks: the networks read it back (:func:`unpack`) to give empty slots a
fixed, very low score (see :mod:`hpcpolicy.offline.networks`).

Example:
    >>> import numpy as np
    >>> obs = {"jobs": np.ones((2, 7), np.float32), "cluster": np.zeros(7, np.float32),
    ...        "mask": np.array([1, 0], np.int8)}
    >>> flat = pack(obs)
    >>> flat.shape, obs_dim(2), k_of(flat.shape[0])
    ((23,), 23, 2)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from hpcpolicy.env.spaces import CLUSTER_FEATURES, JOB_FEATURES
from hpcpolicy.errors import ConfigError

if TYPE_CHECKING:
    import torch

__all__ = ["FC", "FJ", "Episode", "EpisodeRecorder", "k_of", "obs_dim", "pack", "unpack"]

FJ = len(JOB_FEATURES)
"""Job features per slot."""
FC = len(CLUSTER_FEATURES)
"""Cluster features."""

Obs = dict[str, npt.NDArray[Any]]


def obs_dim(k: int) -> int:
    """Length of the flat observation for ``k`` slots."""
    return k * (FJ + 1) + FC


def k_of(dim: int) -> int:
    """The slot count of a flat observation of length ``dim``.

    Raises:
        ConfigError: No slot count gives that length.
    """
    k, rest = divmod(dim - FC, FJ + 1)
    if rest or k < 1:
        raise ConfigError(f"an observation of {dim} values is not a flat hpcpolicy "
                          f"observation (K * {FJ + 1} + {FC} values)")
    return k


def pack(obs: Obs, out: npt.NDArray[np.float32] | None = None) -> npt.NDArray[np.float32]:
    """The flat vector of one observation dict (written into ``out`` when given)."""
    k = obs["mask"].shape[0]
    flat = np.empty(obs_dim(k), np.float32) if out is None else out
    flat[:k * FJ] = obs["jobs"].reshape(-1)
    flat[k * FJ:k * FJ + FC] = obs["cluster"]
    flat[k * FJ + FC:] = obs["mask"]
    return flat


def unpack(x: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``[B, obs_dim(k)]`` -> jobs ``[B, K, Fj]``, cluster ``[B, Fc]``, mask ``bool [B, K]``."""
    jobs = x[:, :k * FJ].reshape(-1, k, FJ)
    cluster = x[:, k * FJ:k * FJ + FC]
    mask = x[:, k * FJ + FC:] > 0.5
    return jobs, cluster, mask


@dataclass
class Episode:
    """One episode: a window of jobs scheduled by one source, one row per decision."""

    source: str
    """What chose the actions: ``logged``, a heuristic name, ``random``, or ``NAME+eps``."""
    window_start: int
    """Index (into the whole workload) of the window's first job."""
    observations: npt.NDArray[np.float32]
    """``[T, obs_dim(k)]`` flat observations (:func:`pack`)."""
    actions: npt.NDArray[np.int64]
    """``[T]`` chosen slots."""
    rewards: npt.NDArray[np.float32]
    """``[T]`` rewards (the environment's reward of each decision)."""
    terminated: bool
    """Every job of the window ran (else the episode was cut: a timeout for d3rlpy)."""
    facts: dict[str, float] = field(default_factory=dict)
    """Source-specific counts (logged: starts inside / outside the visible slots)."""

    def __len__(self) -> int:
        return int(self.actions.shape[0])

    @property
    def ret(self) -> float:
        """Undiscounted return."""
        return float(self.rewards.sum(dtype=np.float64))


class EpisodeRecorder:
    """Collects the rows of one episode as they are decided: each decision's observation is
    written in place (:meth:`next_observation`), then its action (:meth:`add`) and reward
    (:meth:`reward`) are recorded.

    Args:
        k: Slots per observation.
        capacity: Decisions to make room for at first (more are made room for as needed).
    """

    def __init__(self, k: int, capacity: int = 256) -> None:
        self.k = k
        capacity = max(capacity, 1)
        self._jobs = np.zeros((capacity, k, FJ), np.float32)
        self._cluster = np.zeros((capacity, FC), np.float32)
        self._mask = np.zeros((capacity, k), np.float32)
        self._actions: list[int] = []
        self._rewards: list[float] = []

    def __len__(self) -> int:
        return len(self._actions)

    def next_observation(self) -> Obs:
        """Zeroed ``jobs``, ``cluster`` and ``mask`` arrays (``float32``, the mask too) of the
        next decision, to fill in place (:meth:`hpcpolicy.env.driver.EngineDriver.observe`)."""
        i = len(self._actions)
        if i == self._jobs.shape[0]:
            self._jobs, self._cluster, self._mask = (
                np.concatenate([a, np.zeros_like(a)]) for a in (self._jobs, self._cluster,
                                                                self._mask))
        return {"jobs": self._jobs[i], "cluster": self._cluster[i], "mask": self._mask[i]}

    def add(self, action: int) -> None:
        """Record the action of the decision whose observation was filled last (its reward
        comes with :meth:`reward`)."""
        self._actions.append(action)

    def reward(self, value: float) -> None:
        """The reward of the last recorded decision."""
        self._rewards.append(value)

    def finish(self, source: str, window_start: int, terminated: bool,
               facts: dict[str, float] | None = None) -> Episode:
        """The recorded episode, its observations packed as :func:`pack` does."""
        n = len(self._actions)
        if len(self._rewards) != n:
            raise ValueError(f"{n} decisions but {len(self._rewards)} rewards")
        obs = np.concatenate([self._jobs[:n].reshape(n, -1), self._cluster[:n], self._mask[:n]],
                             axis=1)
        return Episode(source, window_start, obs, np.asarray(self._actions, np.int64),
                       np.asarray(self._rewards, np.float32), terminated, facts or {})
