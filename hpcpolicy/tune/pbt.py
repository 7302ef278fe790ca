"""Population-based training's decisions (Jaderberg et al. 2017), as pure functions.

After every round each member has a validation score (mean bounded slowdown: lower is
better). :func:`exploit_explore` applies *truncation selection*: members are ranked by score,
and each member of the bottom ``quantile`` copies a member of the top ``quantile`` drawn at
random (*exploit*: its weights, optimiser state and hyperparameters), then multiplies each
copied hyperparameter by 0.8 or 1.25, drawn at random (*explore*), within
:data:`HYPERPARAMETERS`' bounds. :func:`initial_hyperparameters` spreads the first
population around the base config. All randomness comes from the generator passed in, so a
seed reproduces every decision.

Example:
    >>> import numpy as np
    >>> hypers = [{"learning_rate": 3e-4, "ent_coef": 0.01, "clip_coef": 0.2}] * 4
    >>> new, events = exploit_explore([3.0, 1.0, 4.0, 2.0], hypers, np.random.default_rng(0))
    >>> [(e.member, e.source) for e in events]
    [(2, 1)]
    >>> round(new[2]["clip_coef"] / 0.2, 2) in (0.8, 1.25)
    True
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from hpcpolicy.errors import ConfigError

__all__ = ["HYPERPARAMETERS", "Exploit", "check_hyperparameters", "clamp", "exploit_explore",
           "initial_hyperparameters", "ranking"]

HYPERPARAMETERS: dict[str, tuple[float, float]] = {
    "learning_rate": (1e-6, 1e-2),
    "ent_coef": (0.0, 0.5),
    "clip_coef": (0.02, 1.0),
}
"""The PPO config fields PBT explores, with the range their values are kept in."""

Hyperparameters = dict[str, float]


@dataclass(frozen=True)
class Exploit:
    """One exploit/explore step: ``member`` took over ``source``'s weights."""

    member: int
    """Index of the bottom-quantile member that copies."""
    source: int
    """Index of the top-quantile member copied."""
    member_score: float
    """The member's score before copying."""
    source_score: float
    """The source's score."""
    before: Hyperparameters
    """The member's hyperparameters before copying."""
    after: Hyperparameters
    """The source's hyperparameters, perturbed: the member's for the next round."""

    def to_dict(self, names: Sequence[str]) -> dict[str, Any]:
        """JSON-ready dict, with members named by ``names``; NaN scores as null."""
        return {"member": names[self.member], "copied": names[self.source],
                "member_score": _finite(self.member_score),
                "source_score": _finite(self.source_score),
                "before": dict(self.before), "after": dict(self.after)}


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def clamp(name: str, value: float) -> float:
    """``value`` kept within the range of the explored field ``name``."""
    low, high = HYPERPARAMETERS[name]
    return min(max(value, low), high)


def check_hyperparameters(base: Mapping[str, Any]) -> Hyperparameters:
    """The explored fields of a config dict, checked to lie in :data:`HYPERPARAMETERS`' ranges.

    Raises:
        ConfigError: A value outside its range (the message names the field and the range).
    """
    values = {name: float(base[name]) for name in HYPERPARAMETERS}
    for name, value in values.items():
        low, high = HYPERPARAMETERS[name]
        if not low <= value <= high:
            raise ConfigError(f"config field `{name}` is {value:g}, outside the range "
                              f"population-based training explores ({low:g}..{high:g}); set "
                              "it inside with --config")
    return values


def initial_hyperparameters(base: Mapping[str, float], population: int,
                            rng: np.random.Generator, spread: float) -> list[Hyperparameters]:
    """The first round's hyperparameters: member 0 has ``base``; every other member each
    base value times ``spread ** u``, u uniform in [-1, 1] (log-uniform), within range.

    Example:
        >>> base = {"learning_rate": 3e-4, "ent_coef": 0.01, "clip_coef": 0.2}
        >>> first = initial_hyperparameters(base, 3, np.random.default_rng(1), 2.0)
        >>> first[0] == base, all(0.1 <= h["clip_coef"] <= 0.4 for h in first)
        (True, True)
    """
    members = [dict(base)]
    for _ in range(1, population):
        members.append({name: clamp(name, base[name] * spread ** rng.uniform(-1.0, 1.0))
                        for name in HYPERPARAMETERS})
    return members


def ranking(scores: Sequence[float]) -> list[int]:
    """Member indices, best (lowest score) first; NaN ranks last, ties go to the lower index.

    Example:
        >>> ranking([2.0, float("nan"), 1.0, 2.0])
        [2, 0, 3, 1]
    """
    return sorted(range(len(scores)),
                  key=lambda i: (math.inf if math.isnan(scores[i]) else scores[i], i))


def exploit_explore(scores: Sequence[float], hypers: Sequence[Mapping[str, float]],
                    rng: np.random.Generator, *, quantile: float = 0.25,
                    factors: tuple[float, float] = (0.8, 1.25)
                    ) -> tuple[list[Hyperparameters], list[Exploit]]:
    """Truncation selection and perturbation after one round.

    Members are ranked by :func:`ranking`; with ``n = max(1, floor(quantile * population))``,
    each of the ``n`` worst members, in index order, copies one of the ``n`` best drawn
    uniformly, and gets the copied hyperparameters each multiplied by one of ``factors`` drawn
    uniformly, then kept in range. The other members keep theirs.

    Args:
        scores: Each member's validation score (lower is better).
        hypers: Each member's hyperparameters this round.
        rng: The source of every random choice.
        quantile: Share of the population copied from and replaced (at most 0.5).
        factors: Multipliers of the explore step.

    Returns:
        The hyperparameters of every member for the next round, and the exploit events in
        member order.
    """
    order = ranking(scores)
    cut = max(1, math.floor(quantile * len(scores)))
    top, bottom = order[:cut], sorted(order[-cut:])
    new = [dict(h) for h in hypers]
    events = []
    for member in bottom:
        source = top[int(rng.integers(len(top)))]
        after = {name: clamp(name, hypers[source][name] * float(rng.choice(factors)))
                 for name in HYPERPARAMETERS}
        new[member] = after
        events.append(Exploit(member, source, scores[member], scores[source],
                              dict(hypers[member]), after))
    return new, events
