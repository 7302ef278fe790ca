"""Fidelity: how closely the replayed baseline reproduces the waits the log recorded.

Only jobs with a logged start (and a replayed one) are compared; the logged wait is
``logged start - submit``. Figures (README, "Reading the fidelity section"):

* ``mean_abs_error_s`` / ``median_abs_error_s`` -- per job, |simulated - logged wait|;
* ``pearson`` on the waits, and ``spearman`` on their ranks (does the replay keep the same
  jobs waiting long, whatever the absolute level);
* ``wasserstein_s`` -- the earth mover's distance between the two wait distributions (the
  mean gap between their sorted values), and ``ks`` -- the largest gap between their
  cumulative distributions (0 = identical, 1 = disjoint);
* the same per calendar month of submission, to find the periods the replay misses
  (outages, reservations, a changed machine).

:func:`trust` turns these into good / fair / poor with fixed, documented thresholds
(:data:`TRUST_RULES`). The replay does not model what :data:`NOT_MODELLED` lists, so some
gap is expected even for the policy the site really ran.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    import polars as pl

__all__ = ["MONTH_LIMIT", "NOT_MODELLED", "NO_STARTS", "RELATIVE_ONLY", "TRUST_RULES", "fidelity",
           "months_off", "records_no_starts", "spearman", "trust", "wait_figures"]

F64 = npt.NDArray[np.float64]

NOT_MODELLED = (
    "advance reservations and maintenance windows",
    "node outages and drained nodes",
    "fair-share and priority history from before the log starts (and the site's exact "
    "priority weights)",
    "job dependencies, held jobs and per-user or per-account limits",
    "partitions with their own nodes, unless a cluster spec file describes them",
    "the real scheduler's cycle interval and backfill depth limits",
)
"""What the replay leaves out, in words for the report."""

TRUST_RULES = (
    ("good", 0.6, 0.25),
    ("fair", 0.3, 0.5),
)
"""(level, minimum Spearman correlation, maximum relative error of the mean wait); a replay
that meets neither is ``poor``."""

NO_STARTS = "the log records no start times, so the simulator cannot be checked against it"
"""Why a log without starts (a model trace, a wait field of -1 throughout) has no fidelity."""
RELATIVE_ONLY = (f"{NO_STARTS[0].upper()}{NO_STARTS[1:]}: the what-if then compares policies "
                 "only relatively; read its changes as relative (baseline and candidates face "
                 "the same simulator), not its absolute waits")
"""What a log without starts means for the what-if, said once wherever it matters."""


def records_no_starts(logged_start: npt.NDArray[np.int64]) -> bool:
    """Whether no job of a workload has a logged start (-1 where unknown)."""
    return not bool((logged_start >= 0).any())


MIN_JOBS = 50
"""Fewest jobs with a logged start for the figures to mean anything."""

MONTH_LIMIT = 0.5
"""Relative error of a month's mean wait beyond which a report flags the month."""


def months_off(per_month: list[dict[str, Any]], limit: float = MONTH_LIMIT) -> list[str]:
    """The months whose replayed mean wait is off the logged one by more than ``limit`` (a
    share of the logged mean; months whose logged mean wait is 0 have no such share).

    Example:
        >>> months_off([{"month": "2002-07", "logged_mean_wait_s": 100.0,
        ...              "simulated_mean_wait_s": 160.0},
        ...             {"month": "2002-08", "logged_mean_wait_s": 100.0,
        ...              "simulated_mean_wait_s": 140.0}])
        ['2002-07']
    """
    return [m["month"] for m in per_month if m["logged_mean_wait_s"] > 0 and abs(
        m["simulated_mean_wait_s"] - m["logged_mean_wait_s"]) > limit * m["logged_mean_wait_s"]]


def _flag_months(per_month: list[dict[str, Any]]) -> str:
    """A sentence naming the months :func:`months_off` flags (at most six), or empty."""
    off = months_off(per_month)
    if not off:
        return ""
    shown = ", ".join(off[:6]) + (f" and {len(off) - 6} more" if len(off) > 6 else "")
    return (f" In {len(off)} of {len(per_month)} months ({shown}) the replay's mean wait is off "
            f"the log's by more than {MONTH_LIMIT:.0%}: do not read those months' absolute "
            "waits from this replay.")


def _ranks(x: F64) -> F64:
    """Average ranks (ties share the mean of their positions), as Spearman needs."""
    order = np.argsort(x, kind="stable")
    sorted_x = x[order]
    ranks = np.empty(len(x))
    # the first position of each run of equal values, and its length
    starts = np.flatnonzero(np.concatenate(([True], sorted_x[1:] != sorted_x[:-1])))
    lengths = np.diff(np.concatenate((starts, [len(x)])))
    mean_rank = starts + (lengths - 1) / 2.0
    ranks[order] = np.repeat(mean_rank, lengths)
    return ranks


def _pearson(a: F64, b: F64) -> float | None:
    if len(a) < 2 or a.std() == 0 or b.std() == 0:
        return None
    return float(np.corrcoef(a, b)[0, 1])


def spearman(a: F64, b: F64) -> float | None:
    """Spearman's rank correlation (ties share their mean rank); None when either side is
    constant, so that there is no order to compare.

    Example:
        >>> spearman(np.array([1.0, 2.0, 3.0]), np.array([10.0, 30.0, 20.0]))
        0.5
    """
    return _pearson(_ranks(a), _ranks(b))


def wait_figures(logged: F64, simulated: F64) -> dict[str, Any]:
    """The figures of the module docstring for two aligned arrays of waits (s)."""
    err = np.abs(simulated - logged)
    ls, ss = np.sort(logged), np.sort(simulated)
    grid = np.concatenate((ls, ss))
    ks = np.abs(np.searchsorted(ls, grid, side="right")
                - np.searchsorted(ss, grid, side="right")).max() / len(ls)
    return {
        "jobs": len(logged),
        "logged_mean_wait_s": float(logged.mean()),
        "simulated_mean_wait_s": float(simulated.mean()),
        "mean_abs_error_s": float(err.mean()),
        "median_abs_error_s": float(np.median(err)),
        "pearson": _pearson(logged, simulated),
        "spearman": spearman(logged, simulated),
        "wasserstein_s": float(np.abs(ls - ss).mean()),
        "ks": float(ks),
    }


def trust(spearman: float | None, logged_mean: float, simulated_mean: float) -> str:
    """good / fair / poor by :data:`TRUST_RULES`."""
    rel = abs(simulated_mean - logged_mean) / logged_mean if logged_mean > 0 else \
        (0.0 if simulated_mean == 0 else float("inf"))
    for level, min_rho, max_rel in TRUST_RULES:
        if spearman is not None and spearman >= min_rho and rel <= max_rel:
            return level
    return "poor"


def _explain(fig: dict[str, Any], level: str) -> str:
    logged, simulated = fig["logged_mean_wait_s"], fig["simulated_mean_wait_s"]
    rel = (simulated - logged) / logged if logged > 0 else 0.0
    rho = fig["spearman"]
    ranking = "does not rank jobs' waits" if rho is None else (
        f"ranks jobs' waits {'closely ' if rho >= 0.6 else 'loosely ' if rho >= 0.3 else 'un'}"
        f"like the log (Spearman {rho:.2f})")
    level_text = {
        "good": "Absolute waits from this replay can be quoted with care; differences between "
                "policies are more reliable still, since both share the same simplifications.",
        "fair": "Trust differences between policies more than absolute waits: both runs share "
                "the replay's simplifications, but the absolute level is off.",
        "poor": "The replay does not reproduce this log's waits: read the comparisons as "
                "directions on a simplified machine, not as forecasts, and check the months "
                "with the largest errors for events the replay does not model.",
    }[level]
    return (f"Over {fig['jobs']:,} jobs with a logged start, the baseline replay {ranking}, and "
            f"its mean wait is {abs(rel):.0%} {'higher' if rel >= 0 else 'lower'} than logged. "
            f"Trust: {level}. {level_text}")


def fidelity(outcomes: pl.DataFrame, origin: int, run_id: str) -> dict[str, Any]:
    """The fidelity section for the baseline's replay of the log as it was.

    Args:
        outcomes: the baseline's outcome table in the as-logged scenario.
        origin: epoch seconds of t = 0 (for calendar months).
        run_id: the run compared, recorded in the section.
    """
    import polars as pl

    empty: dict[str, Any] = {
        "available": False, "reason": None, "run": run_id, "jobs": 0,
        "logged_mean_wait_s": None, "simulated_mean_wait_s": None, "mean_abs_error_s": None,
        "median_abs_error_s": None, "pearson": None, "spearman": None, "wasserstein_s": None,
        "ks": None, "per_month": [], "trust": None, "explanation": "",
        "not_modelled": list(NOT_MODELLED),
    }
    both = outcomes.filter(pl.col("logged_start").is_not_null() & pl.col("start").is_not_null())
    if both.height == 0 and outcomes["logged_start"].null_count() < outcomes.height:
        reason = ("no job with a logged start was started by the replay (none fits the "
                  "machine), so there is nothing to compare")
        return empty | {"reason": reason, "jobs": 0, "explanation": reason}
    if both.height < MIN_JOBS:
        reason = (f"{NO_STARTS} (no job has a start or wait time, as in a model trace or a "
                  "log whose wait field is -1 throughout)" if both.height == 0 else
                  f"only {both.height} jobs have a logged start; at least {MIN_JOBS} are needed")
        return empty | {"reason": reason, "jobs": both.height, "explanation": reason}
    logged = (both["logged_start"] - both["submit"]).to_numpy().astype(np.float64)
    simulated = both["wait"].to_numpy().astype(np.float64)
    fig = wait_figures(logged, simulated)
    level = trust(fig["spearman"], fig["logged_mean_wait_s"], fig["simulated_mean_wait_s"])
    months = (both["submit"].to_numpy() + origin).astype("datetime64[s]").astype("datetime64[M]")
    # each month's jobs as one slice, in job order (a mask per month would scan every job
    # once a month: 2,000 months of a 10 M-job log)
    order = np.argsort(months, kind="stable")
    logged_m, simulated_m = logged[order], simulated[order]
    found, first = np.unique(months[order], return_index=True)
    per_month = []
    for month, lo, hi in zip(found, first, [*first[1:], len(order)], strict=True):
        if hi - lo < 2:
            continue
        f = wait_figures(logged_m[lo:hi], simulated_m[lo:hi])
        per_month.append({"month": str(month), "jobs": f["jobs"],
                          "logged_mean_wait_s": f["logged_mean_wait_s"],
                          "simulated_mean_wait_s": f["simulated_mean_wait_s"],
                          "median_abs_error_s": f["median_abs_error_s"],
                          "spearman": f["spearman"]})
    negative = int((logged < 0).sum())
    caveat = (f"{negative:,} jobs log a start before their submit (kept as negative waits)"
              if negative else None)
    return empty | fig | {"available": True, "reason": caveat, "per_month": per_month,
                          "trust": level,
                          "explanation": _explain(fig, level) + _flag_months(per_month)}
