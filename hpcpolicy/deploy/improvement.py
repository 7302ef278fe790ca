"""Whether a learned policy may replace the best heuristic: a safe-policy-improvement test on
paired validation windows.

The policy and the heuristic replay the same windows, so each window gives one paired
difference ``policy - heuristic`` of mean bounded slowdown; the window's own difficulty (a
burst, a quiet week) cancels out. Per-window slowdowns are heavy-tailed (one window of a trace
can score 100 times another), so no normal approximation is assumed: the mean difference is
resampled over windows (a percentile bootstrap, fixed seed, so the decision is deterministic)
and the policy is deployed only when the one-sided upper bound of that mean, at
``confidence``, is below zero, i.e. it is better with that confidence. A tie, a single window,
or a doubtful gain keeps the heuristic: wrongly deploying a worse policy costs the site more
than wrongly keeping a heuristic that was already good enough.

Example:
    >>> decide([1.0, 2.0, 3.0, 4.0], [2.0, 3.0, 4.0, 5.0])["deploy"]
    True
    >>> decide([3.0], [5.0])["deploy"]  # one window: no confidence
    False
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["CONFIDENCE", "RESAMPLES", "decide"]

CONFIDENCE = 0.95
"""One-sided confidence the policy's gain must reach to be deployed."""
RESAMPLES = 2000
"""Bootstrap resamples of the windows."""


def decide(policy: Sequence[float], fallback: Sequence[float], *,
           confidence: float = CONFIDENCE, resamples: int = RESAMPLES,
           seed: int = 0) -> dict[str, Any]:
    """Deploy the policy over the fallback heuristic? From their per-window mean bounded
    slowdowns on the same windows (lower is better).

    Returns:
        ``{"deploy", "windows", "mean_difference", "upper_bound", "confidence"}``: the
        decision, the number of paired windows, the mean of ``policy - fallback`` and its
        one-sided upper bound (None with fewer than two windows).

    Raises:
        ValueError: The two sequences differ in length.
    """
    if len(policy) != len(fallback):
        raise ValueError(f"{len(policy)} policy windows against {len(fallback)} fallback ones")
    diff = np.asarray(policy, dtype=float) - np.asarray(fallback, dtype=float)
    mean = float(diff.mean()) if diff.size else None
    upper = None
    if diff.size >= 2:
        rng = np.random.default_rng(seed)
        means = diff[rng.integers(0, diff.size, size=(resamples, diff.size))].mean(axis=1)
        upper = float(np.quantile(means, confidence))
    return {"deploy": upper is not None and upper < 0.0, "windows": int(diff.size),
            "mean_difference": mean, "upper_bound": upper, "confidence": confidence}
