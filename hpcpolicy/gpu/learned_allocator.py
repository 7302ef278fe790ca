"""A learned GPU-sharing allocator: weights over placement features, found by policy search.

The allocator scores each node that can take a pod with ``weights . features`` (the features
of :func:`hpcpolicy.gpu.allocators.features`: FGD's score, the fragmentation decrease, what
is left of CPU, memory and GPUs, whether the node is unused, the best-fit remainder, the
node's position) and places the pod on the best; a shared GPU is the one FGD picks. The
search starts from FGD itself (weights ``1, 0, ..., 0, -1e-6``) and improves the weights by
the cross-entropy method, a policy search: each round draws candidate weights around the
current mean, runs the inflation experiment with each on the *training* seeds' draws, and
moves the mean to the best. The return is the allocated GPU share at the arrived workloads
of the bar (100 % and 130 %), averaged; seeds held out for the test are never seen.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from hpcpolicy.config import Config
from hpcpolicy.gpu.allocators import LEARNED, N_FEATURES
from hpcpolicy.gpu.fragmentation import typical_pods
from hpcpolicy.gpu.inflation import draw_arrivals, inflation_curve, replay_pods
from hpcpolicy.gpu.sharing import SharingNodes, SharingPods

__all__ = ["FGD_WEIGHTS", "SearchConfig", "SearchResult", "allocated_share", "search_weights"]

FGD_WEIGHTS = (1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -1e-6)
"""The weights that make the learned allocator FGD (the search's start)."""


@dataclass(frozen=True)
class SearchConfig(Config):
    """The cross-entropy search for the learned allocator's weights."""

    label = "learned allocator"

    train_seeds: tuple[int, ...] = (0, 1)
    """Seeds whose arrivals the candidates are scored on (keep the test seeds apart)."""
    rounds: int = 6
    """Rounds of the search."""
    population: int = 10
    """Candidate weights drawn per round."""
    elite: int = 3
    """How many of the best candidates the next mean and spread come from."""
    sigma: float = 0.02
    """Initial spread of each weight but the first (FGD's score, fixed at 1 for scale)."""
    ratio: float = 1.3
    """Arrived GPU request at which a run stops, over the cluster's GPUs."""
    percents: tuple[int, ...] = (100, 130)
    """Arrived workloads (%) whose allocated share is the return."""
    seed: int = 0
    """Seeds the candidates' draws."""

    def validate(self) -> None:
        """Seeds given, counts positive, elite within the population."""
        self._require(len(self.train_seeds) > 0, "train_seeds", "give at least one seed")
        self._at_least(1, "rounds", "population", "elite")
        self._require(self.elite <= self.population, "elite",
                      f"must be <= population ({self.population}), got {self.elite}")
        self._require(self.sigma > 0, "sigma", f"must be > 0, got {self.sigma}")


@dataclass(frozen=True)
class SearchResult:
    """The search's outcome.

    Attributes:
        weights: the best weights found (the final mean, or FGD's if nothing beat it).
        history: per round, the mean return of the mean weights and of the best candidate.
        start: FGD's return on the training seeds.
        best: the returned weights' return on the training seeds.
    """

    weights: tuple[float, ...]
    history: tuple[tuple[float, float], ...]
    start: float
    best: float


def allocated_share(nodes: SharingNodes, pods: SharingPods, weights: tuple[float, ...],
                    seeds: tuple[int, ...], percents: tuple[int, ...],
                    ratio: float = 1.3) -> float:
    """Mean allocated GPU share (%) at ``percents`` over the seeds' draws, with ``weights``."""
    typical = typical_pods(pods)
    values = []
    for seed in seeds:
        rng = np.random.default_rng(seed)
        arrivals = pods.take(draw_arrivals(pods, nodes.total_gpus, ratio, rng))
        run = replay_pods(nodes, arrivals, LEARNED, typical, rng, weights)
        values.append(inflation_curve(run, np.asarray(percents, dtype=np.int64)).mean())
    return float(np.mean(values))


def search_weights(nodes: SharingNodes, pods: SharingPods, cfg: SearchConfig,
                   report: Callable[[int, float, float], None] | None = None) -> SearchResult:
    """The cross-entropy search (see the module doc), from FGD's weights.

    Args:
        nodes: the cluster.
        pods: the pod list the training arrivals are drawn from.
        cfg: seeds, rounds, population and spread.
        report: called after each round with (round, mean's return, best candidate's).

    Returns:
        The weights and the returns along the way.
    """
    rng = np.random.default_rng(cfg.seed)

    def value(w: np.ndarray) -> float:
        return allocated_share(nodes, pods, tuple(float(x) for x in w), cfg.train_seeds,
                               cfg.percents, cfg.ratio)

    mean = np.array(FGD_WEIGHTS)
    sigma = np.full(N_FEATURES, cfg.sigma)
    sigma[0] = 0.0
    start = value(mean)
    best_w, best_v = mean.copy(), start
    history = []
    for r in range(cfg.rounds):
        draws = mean + sigma * rng.standard_normal((cfg.population, N_FEATURES))
        returns = np.array([value(w) for w in draws])
        top = draws[np.argsort(returns)[::-1][:cfg.elite]]
        if returns.max() > best_v:
            best_v, best_w = float(returns.max()), draws[int(np.argmax(returns))].copy()
        mean = top.mean(axis=0)
        sigma = np.maximum(top.std(axis=0), 1e-4)
        sigma[0] = 0.0
        history.append((value(mean), float(returns.max())))
        if history[-1][0] > best_v:
            best_v, best_w = history[-1][0], mean.copy()
        if report is not None:
            report(r, *history[-1])
    return SearchResult(tuple(float(x) for x in best_w), tuple(history), start, best_v)
