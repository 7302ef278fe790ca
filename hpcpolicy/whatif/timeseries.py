"""Exact integrals of step functions over time: busy cores and waiting jobs per time bin.

A job holds ``w`` cores on ``[start, end)`` and waits on ``[submit, start)``. The area under
the sum of such boxes up to time ``t`` is ``sum w * (t - s) over s < t`` minus the same over
the ends, which prefix sums over the sorted starts and ends give for any number of ``t`` at
once (:func:`cumulative_area`). Bins and windows are then differences of the area at their
edges: exact, with no sampling, in O((n + bins) log n).
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

__all__ = ["bin_width", "binned_mean", "cumulative_area"]

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]

_NICE_S = (60, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400, 172800, 604800)


def cumulative_area(begin: I64, end: I64, weight: npt.NDArray[np.generic],
                    at: npt.ArrayLike) -> F64:
    """``sum_i weight_i * |[begin_i, end_i) ∩ (-inf, t)|`` for every ``t`` in ``at``.

    Example:
        >>> cumulative_area(np.array([0, 5]), np.array([10, 6]), np.array([2, 1]),
        ...                 [0, 5, 6, 20]).tolist()
        [0.0, 10.0, 13.0, 21.0]
    """
    t = np.asarray(at, dtype=np.float64)
    w = np.asarray(weight, dtype=np.float64)

    def ramp(points: I64) -> F64:
        # Few full-length arrays, reused in place: on 10 M jobs each new one costs more
        # (first-touch page faults) than the arithmetic done in it.
        order = np.argsort(points, kind="stable")
        sorted_points = points[order].astype(np.float64)
        k = np.searchsorted(sorted_points, t, side="left")
        w_sorted = w[order]
        del order
        cum_w = _before(np.cumsum(w_sorted), k)
        np.multiply(w_sorted, sorted_points, out=w_sorted)
        cum_wp = _before(np.cumsum(w_sorted, out=w_sorted), k)
        return np.asarray(t * cum_w - cum_wp, dtype=np.float64)

    return ramp(np.asarray(begin, dtype=np.int64)) - ramp(np.asarray(end, dtype=np.int64))


def _before(cumulative: F64, k: npt.NDArray[np.intp]) -> F64:
    """The sums of the first ``k`` terms, from their running sum (0 where ``k`` is 0)."""
    return np.where(k > 0, cumulative[np.maximum(k - 1, 0)], 0.0) if len(cumulative) \
        else np.zeros(len(k))


def binned_mean(begin: I64, end: I64, weight: npt.NDArray[np.generic], edges: F64) -> F64:
    """Mean of the stacked boxes over each bin ``[edges[k], edges[k+1])``."""
    area = cumulative_area(begin, end, weight, edges)
    return np.asarray(np.diff(area) / np.diff(edges), dtype=np.float64)


def bin_width(span_s: float, max_bins: int) -> int:
    """The smallest round width (1 min ... 1 week, then whole weeks) giving <= ``max_bins``.

    Example:
        >>> bin_width(30 * 86400, 400)
        7200
    """
    need = span_s / max_bins
    for width in _NICE_S:
        if width >= need:
            return width
    return 604800 * math.ceil(need / 604800)
