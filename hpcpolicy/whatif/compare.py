"""Paired comparison of two replays of the same jobs, by time window, with bootstrap intervals.

Why windows: the jobs of one week are not independent of each other (one long queue delays
hundreds of jobs at once), but weeks far enough apart nearly are. So the log is cut into
windows of ``period_s`` (default one week) from its first submit; a job belongs to the window
in which it was submitted; both replays are measured on each window's jobs, and the windows
are resampled with replacement (a cluster bootstrap, ``bootstrap`` replicates, seeded) to get
a confidence interval for the difference candidate - baseline of each metric over the pooled
jobs, and one for the relative change candidate / baseline - 1 (from the same replicates, so
it never passes -100 %):

* means (``mean_wait_s``, ``mean_bsld``, ``mean_response_s``) are exact ratios of resampled
  sums, so the interval is centred on the whole-log difference;
* percentiles (``p95_wait_s``, ``p95_bsld``) are read off resampled histograms with
  :data:`HIST_BINS` log-spaced bins (within about 2 % of the exact value);
* ``utilization`` is busy core-seconds inside each window over the window's capacity, both
  counted only until the last submit (:func:`window_stats`'s ``until``), also a ratio of
  sums. It is the share of the machine used *while jobs arrive*: over a span that also
  holds the drain after the last submit, every policy does the same work and scores the
  same, and over each run's own makespan (``hpcpolicy simulate``'s utilisation) a policy that
  leaves one big job to the end looks worse without having done less.

The whole-log figure of each metric is the value its bootstrap is centred on: means and
utilisation are the ratio of sums over all windows; a percentile is the exact value, and each
replicate of it is corrected by the difference between the exact value and the histogram's
reading of the whole sample, so the two agree.

A metric is **better** (or **worse**) only where the whole interval lies on that side of zero;
**no difference** where the two runs tie in every resample (or, without resamples, in every
window and over the whole log); otherwise there is **no clear difference**. Each resample is
counted as a win, a loss or a tie (``share_better``, ``share_worse``, ``share_tied``): a tie is
never a loss. With fewer than :data:`MIN_WINDOWS` windows no interval is given.

Every compared metric is non-negative (a bounded slowdown at least 1), so a percentile's
corrected replicates are clipped there, and a relative change (whole-log and interval) is
given only where the baseline is at least :data:`RATIO_FLOOR` of its unit over the whole log
and in every resample: dividing by a baseline of (nearly) nothing gives figures such as
-891 % that mean nothing. There the row
keeps the absolute change and says why in ``rel_note``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from hpcpolicy.errors import ConfigError
from hpcpolicy.whatif.timeseries import cumulative_area

if TYPE_CHECKING:
    import polars as pl

__all__ = ["HIST_BINS", "METRICS", "MIN_WINDOWS", "RATIO_FLOOR", "Metric", "RunWindows",
           "WindowStats",
           "compare_runs", "get_metric", "run_windows", "window_stats", "with_histograms"]

F64 = npt.NDArray[np.float64]
HIST_BINS = 1024
"""Log-spaced histogram bins used to bootstrap percentiles."""
MIN_WINDOWS = 4
"""Fewest windows for which a bootstrap interval is given."""
RATIO_FLOOR = {"s": 60.0, "": 1.0, "share": 0.001}
"""Smallest baseline, by unit, that a relative change is taken of. A wait or response under a
minute is within one pass of the scheduler (Slurm's main scheduling loop runs every
``sched_interval``, 60 s by default: slurm.conf(5)); a bounded slowdown is at least 1 by
definition; a utilisation under 0.1 % is an idle machine."""


@dataclass(frozen=True)
class Metric:
    """A compared metric: how it is computed and which direction is good."""

    key: str
    label: str
    unit: str
    """``s``, ``""`` (a ratio) or ``share``."""
    better: str
    """``lower`` or ``higher``."""
    column: str | None
    """Outcome column it summarises (None for utilisation)."""
    quantile: float | None = None
    """None for a mean."""

    def to_dict(self) -> dict[str, str]:
        """The fields a report shows."""
        return {"key": self.key, "label": self.label, "unit": self.unit, "better": self.better}


METRICS = (
    Metric("mean_bsld", "mean bounded slowdown", "", "lower", "bsld"),
    Metric("mean_wait_s", "mean wait", "s", "lower", "wait"),
    Metric("p95_wait_s", "p95 wait", "s", "lower", "wait", 0.95),
    Metric("p95_bsld", "p95 bounded slowdown", "", "lower", "bsld", 0.95),
    Metric("mean_response_s", "mean response time", "s", "lower", "response"),
    Metric("utilization", "utilisation to last submit", "share", "higher", None),
)
"""Every compared metric, in display order."""


def get_metric(key: str) -> Metric:
    """The metric named ``key``.

    Raises:
        ConfigError: an unknown key; the message lists the known ones.
    """
    for metric in METRICS:
        if metric.key == key:
            return metric
    raise ConfigError(f"unknown metric {key!r}; use one of {', '.join(m.key for m in METRICS)}")


@dataclass
class WindowStats:
    """Per-window sums of one replay on a fixed window grid."""

    jobs: F64
    """Started jobs per window (by submit)."""
    sums: dict[str, F64]
    """Column -> sum over each window's started jobs."""
    hists: dict[str, F64]
    """Column -> (windows x :data:`HIST_BINS`) counts."""
    values: dict[str, F64]
    """Metric key -> exact value per window (NaN where undefined)."""
    busy: F64
    """Busy core-seconds inside each window."""
    capacity: F64
    """Core-seconds the machine offers inside each window (until the last submit)."""

    def utilization(self) -> float | None:
        """Busy core-seconds over capacity, all windows pooled (None without capacity)."""
        capacity = float(self.capacity.sum())
        return float(self.busy.sum()) / capacity if capacity > 0 else None


def _edges(top: float) -> F64:
    return np.concatenate(([0.0], np.logspace(0.0, np.log10(max(top, 10.0) + 1.0),
                                              HIST_BINS)))


@dataclass
class RunWindows:
    """The per-window figures of one replay that do not depend on the replay it is compared
    with: all of :class:`WindowStats` but the histograms, whose bins do (their top is the
    largest value of the two runs). Made once per run (:func:`run_windows`) on a grid long
    enough for all its comparisons, and binned for each (:func:`with_histograms`)."""

    stats: WindowStats
    """Everything but the histograms (``hists`` is empty)."""
    win: npt.NDArray[np.int64]
    """The window of each started job."""
    samples: dict[str, F64]
    """Histogram column -> each started job's value."""
    tops: dict[str, float]
    """Histogram column -> its largest value in the run (0 if none)."""


def window_stats(outcomes: pl.DataFrame, cores: int, t0: int, period_s: int, n_windows: int,
                 hist_top: dict[str, float], until: int | None = None) -> WindowStats:
    """Per-window sums, histograms and exact values of one replay's outcome table.

    Args:
        outcomes: the run's outcome table (:func:`hpcpolicy.sim.metrics.outcome_table`).
        cores: the machine's cores (utilisation denominator).
        t0: start of window 0 (s since origin); window ``k`` is ``[t0 + k p, t0 + (k+1) p)``.
        period_s: window length ``p``.
        n_windows: windows on the grid (enough to hold every submit and every end).
        hist_top: column -> largest value over the compared runs (shared histogram bins).
        until: end of the utilisation span (the last submit); None: the end of the grid.
    """
    run = run_windows(outcomes, cores, t0, period_s, n_windows, until)
    return with_histograms(run, hist_top, n_windows)


def run_windows(outcomes: pl.DataFrame, cores: int, t0: int, period_s: int, n_windows: int,
                until: int | None = None) -> RunWindows:
    """All of :func:`window_stats` (same arguments) but the histograms."""
    import polars as pl

    done = outcomes.filter(pl.col("start").is_not_null())
    win = ((done["submit"].to_numpy() - t0) // period_s).astype(np.int64)
    jobs = np.bincount(win, minlength=n_windows).astype(np.float64)
    sums: dict[str, F64] = {}
    values: dict[str, F64] = {}
    for column in ("wait", "bsld", "response"):
        x = done[column].to_numpy().astype(np.float64)
        sums[column] = np.bincount(win, weights=x, minlength=n_windows).astype(np.float64)
        with np.errstate(invalid="ignore", divide="ignore"):
            values[f"mean_{column}" + ("_s" if column != "bsld" else "")] = sums[column] / jobs
    samples: dict[str, F64] = {}
    for metric in METRICS:
        if metric.quantile is None or metric.column is None:
            continue
        x = samples[metric.column] = done[metric.column].to_numpy().astype(np.float64)
        values[metric.key] = _window_quantiles(win, x, metric.quantile, n_windows)
    tops = {c: float(outcomes[c].max() or 0.0) for c in samples}  # type: ignore[arg-type]
    edges_t = t0 + period_s * np.arange(n_windows + 1, dtype=np.float64)
    if until is not None:
        edges_t = np.minimum(edges_t, float(until))
    busy = np.diff(cumulative_area(done["start"].to_numpy(), done["end"].to_numpy(),
                                   done["alloc_cores"].to_numpy(), edges_t))
    capacity = float(cores) * np.diff(edges_t)
    with np.errstate(invalid="ignore", divide="ignore"):
        values["utilization"] = np.where(capacity > 0, busy / capacity, np.nan)
    return RunWindows(WindowStats(jobs, sums, {}, values, busy, capacity), win, samples, tops)


def with_histograms(run: RunWindows, hist_top: dict[str, float], n_windows: int) -> WindowStats:
    """``run``'s :class:`WindowStats` on the first ``n_windows`` windows of its grid (which
    must hold all its submits), histograms binned up to ``hist_top`` (as in
    :func:`window_stats`). Every figure is per window, so a longer grid cut to ``n_windows``
    gives the same bits as that grid itself."""
    hists: dict[str, F64] = {}
    for column, x in run.samples.items():
        # bin b of each job, then its cell win * HIST_BINS + b, in place: two arrays a job
        b = np.searchsorted(_edges(hist_top[column]), x, side="right")
        b -= 1
        np.clip(b, 0, HIST_BINS - 1, out=b)
        b += run.win * HIST_BINS
        flat = np.bincount(b, minlength=n_windows * HIST_BINS)
        hists[column] = flat.reshape(n_windows, HIST_BINS).astype(np.float64)
    return replace(_take(run.stats, slice(0, n_windows)), hists=hists)


def _window_quantiles(win: npt.NDArray[np.int64], x: F64, q: float, n: int) -> F64:
    """Exact linear-interpolation quantile of ``x`` within each window (NaN if empty)."""
    out = np.full(n, np.nan)
    # np.quantile does not care about the order within a window; jobs come in submit order,
    # so the window numbers are already sorted (then a stable sort would change nothing)
    w_sorted, x_sorted = win, x
    if (win[1:] < win[:-1]).any():
        order = np.argsort(win, kind="stable")
        w_sorted, x_sorted = win[order], x[order]
    bounds = np.searchsorted(w_sorted, np.arange(n + 1))
    for k in range(n):
        lo, hi = bounds[k], bounds[k + 1]
        if hi > lo:
            out[k] = float(np.quantile(x_sorted[lo:hi], q))
    return out


def _hist_quantile(hist: F64, edges: F64, q: float) -> F64:
    """Quantile ``q`` of each row of ``hist`` (linear within the bin)."""
    total = hist.sum(axis=1)
    cum = np.cumsum(hist, axis=1)
    target = q * total
    k = np.minimum((cum < target[:, None]).sum(axis=1), hist.shape[1] - 1)
    before = np.where(k > 0, cum[np.arange(len(k)), k - 1], 0.0)
    inside = hist[np.arange(len(k)), k]
    frac = np.where(inside > 0, (target - before) / np.where(inside > 0, inside, 1.0), 0.0)
    return np.asarray(edges[k] + frac * (edges[k + 1] - edges[k]), dtype=np.float64)


_BLOCK = 32
"""Histogram bins per block in :func:`_resampled_quantile`."""


def _resampled_quantile(counts: F64, hist: F64, edges: F64, q: float) -> F64:
    """``_hist_quantile(counts @ hist, edges, q)``, the same bits, at a fraction of the cost.

    ``counts @ hist`` costs replicates x windows x :data:`HIST_BINS` multiplications (18
    G-flops for 2,000 replicates of 9,000 weekly windows, a 10 M-job log). Here the bins are
    first summed in blocks of :data:`_BLOCK`, which finds the block holding each replicate's
    quantile, and only that block's bins are resampled. Every sum is of whole numbers, exact
    in float64 in any order, so the result is identical.
    """
    bins = hist.shape[1]
    blocks = bins // _BLOCK
    coarse = np.cumsum(counts @ hist.reshape(len(hist), blocks, _BLOCK).sum(axis=2), axis=1)
    target = q * coarse[:, -1]
    block = np.minimum((coarse < target[:, None]).sum(axis=1), blocks - 1)
    out = np.empty(len(counts))
    for b in np.unique(block):
        rows = np.flatnonzero(block == b)
        fine = counts[rows] @ hist[:, b * _BLOCK:(b + 1) * _BLOCK]
        below = coarse[rows, b - 1] if b > 0 else np.zeros(len(rows))
        cum = below[:, None] + np.cumsum(fine, axis=1)
        t = target[rows]
        j = np.minimum((cum < t[:, None]).sum(axis=1), _BLOCK - 1)
        before = np.where(j > 0, cum[np.arange(len(j)), j - 1], below)
        inside = fine[np.arange(len(j)), j]
        frac = np.where(inside > 0, (t - before) / np.where(inside > 0, inside, 1.0), 0.0)
        k = b * _BLOCK + j
        out[rows] = edges[k] + frac * (edges[k + 1] - edges[k])
    return out


def _replicate_values(stats: WindowStats, counts: F64, metric: Metric,
                      edges: F64 | None, whole: float | None) -> F64:
    """The metric over the pooled jobs of each bootstrap replicate (rows of ``counts``); a
    percentile's replicates are shifted so that the whole sample reads ``whole`` exactly."""
    with np.errstate(invalid="ignore", divide="ignore"):
        if metric.key == "utilization":
            return np.asarray((counts @ stats.busy) / (counts @ stats.capacity))
        assert metric.column is not None
        if metric.quantile is None:
            return np.asarray((counts @ stats.sums[metric.column]) / (counts @ stats.jobs))
        assert edges is not None
        hist = stats.hists[metric.column]
        reps = _resampled_quantile(counts, hist, edges, metric.quantile)
        if whole is not None:
            reps += whole - _hist_quantile(hist.sum(axis=0, keepdims=True), edges,
                                           metric.quantile)[0]
        # the shift may carry a replicate below what the metric can be: a wait below 0, a
        # bounded slowdown below 1
        return np.maximum(reps, 1.0 if metric.column == "bsld" else 0.0)


def _verdict(metric: Metric, low: float | None, high: float | None, tied: bool) -> str:
    if tied:
        return "no difference"
    if low is None or high is None:
        return "no clear difference"
    sign = -1.0 if metric.better == "lower" else 1.0
    if sign * low > 0 and sign * high > 0:
        return "better"
    if sign * low < 0 and sign * high < 0:
        return "worse"
    return "no clear difference"


def compare_runs(base: WindowStats, cand: WindowStats, whole_base: dict[str, Any],
                 whole_cand: dict[str, Any], metrics: Sequence[Metric], *, bootstrap: int,
                 confidence: float, seed: int, hist_top: dict[str, float]) -> list[dict[str, Any]]:
    """Per metric: whole-run values, difference, bootstrap interval and verdict.

    Args:
        base, cand: the two replays' window statistics (same grid, same jobs).
        whole_base, whole_cand: their whole-run summaries
            (:func:`hpcpolicy.sim.metrics.summarize`).
        metrics: which metrics, in order.
        bootstrap: replicates (>= 100).
        confidence: interval level, e.g. 0.95.
        seed: the resampling seed (the same seed gives the same intervals).
        hist_top: column -> histogram top, as given to :func:`window_stats`.
    """
    if bootstrap < 100:
        raise ConfigError(f"--bootstrap must be at least 100 replicates, not {bootstrap}")
    if not 0.5 <= confidence < 1:
        raise ConfigError(f"--confidence must be in [0.5, 1), not {confidence}")
    # windows where either run has a job or a busy core take part; empty ones add nothing
    active = np.flatnonzero((base.jobs + cand.jobs + base.busy + cand.busy) > 0)
    counts = _resample(len(active), bootstrap, seed)
    base_active, cand_active = _take(base, active), _take(cand, active)
    alpha = (1 - confidence) / 2
    rows = []
    for metric in metrics:
        b_val, c_val = whole_base.get(metric.key), whole_cand.get(metric.key)
        diff = None if b_val is None or c_val is None else c_val - b_val
        low = high = rel_low = rel_high = None
        shares: dict[str, float | None] = dict.fromkeys(_SHARES)
        b_reps = c_reps = None
        if counts is not None:
            edges = _edges(hist_top[metric.column]) if metric.quantile is not None and \
                metric.column is not None else None
            b_reps = _replicate_values(base_active, counts, metric, edges, b_val)
            c_reps = _replicate_values(cand_active, counts, metric, edges, c_val)
            diffs = c_reps - b_reps
            if np.isfinite(diffs).any():
                low, high = _interval(diffs, alpha)
                shares = _shares(metric, b_reps, c_reps)
        bw, cw = base_active.values[metric.key], cand_active.values[metric.key]
        ok = np.isfinite(bw) & np.isfinite(cw)
        better = cw[ok] < bw[ok] if metric.better == "lower" else cw[ok] > bw[ok]
        tied = diff == 0 and (shares["share_tied"] == 1.0 if counts is not None
                              else _same_windows(bw, cw))
        note = _ratio_note(metric, b_val, b_reps)
        if note is None and b_reps is not None and c_reps is not None:
            rel_low, rel_high = _interval(c_reps / b_reps - 1, alpha)
        rows.append({
            "key": metric.key, "baseline": b_val, "candidate": c_val, "diff": diff,
            "rel_diff": diff / b_val if diff is not None and b_val and note is None else None,
            "ci_low": low, "ci_high": high, "rel_ci_low": rel_low, "rel_ci_high": rel_high,
            "rel_note": note, "verdict": _verdict(metric, low, high, tied), **shares,
            "windows_better": int(better.sum()),
        })
    return rows


_SHARES = ("share_better", "share_worse", "share_tied")


def _same_windows(base: F64, cand: F64) -> bool:
    """Whether two runs' per-window values of a metric are the same (NaN where the other is)."""
    return bool(np.array_equal(base, cand, equal_nan=True))


def _shares(metric: Metric, b_reps: F64, c_reps: F64) -> dict[str, float | None]:
    """The shares of the resamples (where both are defined) in which the candidate wins,
    loses and ties (equal to within rounding: the same sums taken in another order)."""
    ok = np.isfinite(b_reps) & np.isfinite(c_reps)
    b, c = b_reps[ok], c_reps[ok]
    tie = np.isclose(c, b, rtol=1e-12, atol=0.0)
    win = ~tie & ((c < b) if metric.better == "lower" else (c > b))
    n = len(b)
    return {"share_better": float(win.sum()) / n,
            "share_worse": float((~tie & ~win).sum()) / n,
            "share_tied": float(tie.sum()) / n}


def _ratio_note(metric: Metric, whole: float | None, reps: F64 | None) -> str | None:
    """Why no relative change is given for this metric (None: it is given)."""
    floor = RATIO_FLOOR[metric.unit]
    if whole is None:
        return None
    shown = f"{whole:.1%}" if metric.unit == "share" else \
        f"{whole:,.0f} s" if metric.unit == "s" else f"{whole:.2f}"
    small = f"{floor:.1%}" if metric.unit == "share" else \
        "1 min" if metric.unit == "s" else f"{floor:g}"
    if whole < floor:
        return (f"absolute change only: the baseline's {metric.label} is {shown}, "
                f"under {small}, too small to divide by")
    if reps is not None and (~np.isfinite(reps) | (reps < floor)).any():
        return (f"absolute change only: the baseline's {metric.label} falls under {small} "
                "in some resamples, too small to divide by")
    return None


def _interval(reps: F64, alpha: float) -> tuple[float, float]:
    """The central ``1 - 2 alpha`` percentile interval of the finite replicates."""
    low, high = np.quantile(reps[np.isfinite(reps)], [alpha, 1 - alpha])
    return float(low), float(high)


def _take(stats: WindowStats, index: npt.NDArray[np.int64] | slice) -> WindowStats:
    return WindowStats(stats.jobs[index], {k: v[index] for k, v in stats.sums.items()},
                       {k: v[index] for k, v in stats.hists.items()},
                       {k: v[index] for k, v in stats.values.items()},
                       stats.busy[index], stats.capacity[index])


def _resample(n_windows: int, replicates: int, seed: int) -> F64 | None:
    """(replicates x windows) counts of each window in a resample with replacement."""
    if n_windows < MIN_WINDOWS:
        return None
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, n_windows, size=(replicates, n_windows))
    offsets = np.arange(replicates)[:, None] * n_windows
    flat = np.bincount((picks + offsets).ravel(), minlength=replicates * n_windows)
    return flat.reshape(replicates, n_windows).astype(np.float64)
