"""Decayed usage per user, for the ``fairshare`` policy (reference engine's version).

A job that ran ``cores`` cores from ``s`` to ``e`` adds usage at the rate ``cores`` per second,
each second then decaying by half every ``half_life`` seconds, so at time ``t >= e`` it counts
``cores * h / ln2 * (2^((e - t)/h) - 2^((s - t)/h))`` core-seconds (h = half-life). Usage is
charged when the job ends. Only the users' *shares* of the total matter to the priority, and
all users decay at the same rate, so the engine keeps every amount scaled by ``2^((t - T0)/h)``
and never decays anything; ``T0`` moves forward by 256 half-lives (an exact power-of-two
rescale) before the scale could overflow. The compiled engine does the same arithmetic in the
same order, so both engines rank jobs identically.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

__all__ = ["DecayedUsage"]

LN2 = math.log(2.0)
_SCALE_DOWN = 2.0 ** -256


class DecayedUsage:
    """Per-user decayed usage.

    Example:
        >>> u = DecayedUsage(n_users=2, half_life_s=100)
        >>> u.add(user=0, cores=4, start=0, end=50)
        >>> u.shares().tolist()
        [1.0, 0.0]
    """

    def __init__(self, n_users: int, half_life_s: int) -> None:
        self.half_life_s = half_life_s
        self.weights = np.zeros(n_users)
        self.total = 0.0
        self.t0 = 0

    def add(self, user: int, cores: int, start: int, end: int) -> None:
        """Charge a job that held ``cores`` cores on ``[start, end)``."""
        hl_i = self.half_life_s
        hl = float(hl_i)
        while end - self.t0 > 512 * hl_i:
            self.weights *= _SCALE_DOWN
            self.total *= _SCALE_DOWN
            self.t0 += 256 * hl_i
        x1 = float(start - self.t0) / hl
        x2 = float(end - self.t0) / hl
        c = float(cores) * (hl / LN2) * (math.exp(LN2 * x2) - math.exp(LN2 * x1))
        self.weights[user] += c
        self.total += c

    def shares(self) -> npt.NDArray[np.float64]:
        """Each user's share of all usage (zeros before any usage)."""
        if self.total > 0.0:
            return np.asarray(self.weights / self.total)
        return np.zeros_like(self.weights)
