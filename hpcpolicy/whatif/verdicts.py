"""The words of a comparison: its verdict, its one-sentence summary and its trade-offs.

A comparison's verdict follows its primary metric (``--metric``, default mean bounded
slowdown):

* **better** / **worse**: the primary metric's interval lies wholly on that side of zero,
  and no other compared metric is clearly on the opposite side;
* **mixed**: clearly better on one of the two (the primary metric or another one) and
  clearly worse on the other;
* **likely better** / **likely worse**: the interval straddles zero, but at least
  :data:`LIKELY` of the bootstrap resamples fall on that side;
* **no clear difference**: otherwise.

Groups of jobs that wait materially longer
(:func:`hpcpolicy.whatif.breakdowns.notable_losers`) are listed as trade-offs beside any
verdict, never hidden, but do not change it: nearly every change of policy makes some user
wait longer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hpcpolicy.textfmt import duration, signed_percent
from hpcpolicy.whatif.breakdowns import notable_losers
from hpcpolicy.whatif.compare import Metric

__all__ = ["LIKELY", "VERDICTS", "comparison_verdict", "format_value", "metric_sentence",
           "overall_verdict", "relative_change", "relative_interval", "tradeoffs",
           "verdict_phrase"]

LIKELY = 0.8
"""Share of bootstrap resamples on one side that makes an unclear change *likely* so."""
VERDICTS = ("better", "likely better", "mixed", "no clear difference", "likely worse", "worse")
"""Every comparison verdict, from best to worst."""

_GROUP_WORDS = {"user": ("user {}", "user"), "partition": ("partition {}", "partition"),
                "size_class": ("jobs of {}", "job-size class"),
                "runtime_class": ("jobs running {}", "run-time class")}
SHOWN_LOSERS = 3
"""Losing groups named per grouping; the rest are counted."""


def format_value(metric: Metric, value: float | None) -> str:
    """A metric's value in its unit."""
    if value is None:
        return "-"
    if metric.unit == "s":
        return duration(value)
    if metric.unit == "share":
        return f"{value:.1%}"
    return f"{value:,.2f}" if abs(value) < 1000 else f"{value:,.0f}"


def relative_change(row: dict[str, Any]) -> str:
    """The whole-run change as a signed percentage of the baseline (``-`` if undefined)."""
    base = row["baseline"]
    if row["diff"] is None or not base:
        return "-"
    return signed_percent(row["diff"] / base)


def relative_interval(row: dict[str, Any]) -> str:
    """``-45% .. -30%``, or ``-`` where no interval was computed."""
    if row["rel_ci_low"] is None:
        return "-"
    return f"{signed_percent(row['rel_ci_low'])} .. {signed_percent(row['rel_ci_high'])}"


def metric_sentence(metric: Metric, row: dict[str, Any], confidence: float) -> str:
    """``mean wait 2.1h -> 1.4h (-33%, 95% CI -40% .. -25%)``."""
    text = (f"{metric.label} {format_value(metric, row['baseline'])} -> "
            f"{format_value(metric, row['candidate'])} ({relative_change(row)}")
    if row["rel_ci_low"] is not None:
        text += f", {confidence:.0%} CI {relative_interval(row)}"
    return text + ")"


def tradeoffs(metrics: Sequence[Metric], rows: Sequence[dict[str, Any]], primary: str,
              groups: dict[str, list[dict[str, Any]]], confidence: float) -> list[str]:
    """Sentences for every compared metric that got worse and every notable losing group."""
    found = [f"{metric_sentence(m, r, confidence)} is worse"
             for m, r in zip(metrics, rows, strict=True)
             if r["verdict"] == "worse" and m.key != primary]
    for by, (who, kind) in _GROUP_WORDS.items():
        losers = notable_losers(groups.get(by, []))
        for g in losers[:SHOWN_LOSERS]:
            found.append(f"{who.format(g['name'])} ({g['jobs']:,} jobs) wait "
                         f"{duration(g['diff_mean_wait_s'])} longer on average "
                         f"({signed_percent(g['diff_mean_wait_s'] / g['baseline_mean_wait_s'])})")
        more = len(losers) - SHOWN_LOSERS
        if more > 0:
            plural = "" if more == 1 else "es" if kind.endswith("s") else "s"
            verb = "waits" if more == 1 else "wait"
            found.append(f"{more} more {kind}{plural} also {verb} materially longer")
    return found


def comparison_verdict(metrics: Sequence[Metric], rows: Sequence[dict[str, Any]],
                       primary: str) -> str:
    """The comparison's verdict from its metric rows (the rules are in the module docstring)."""
    main = next(r for m, r in zip(metrics, rows, strict=True) if m.key == primary)
    others = {r["verdict"] for m, r in zip(metrics, rows, strict=True) if m.key != primary}
    if main["verdict"] in ("better", "worse"):
        opposite = "worse" if main["verdict"] == "better" else "better"
        return "mixed" if opposite in others else str(main["verdict"])
    share = main.get("share_better")
    if share is not None and share >= LIKELY:
        return "likely better"
    if share is not None and 1 - share >= LIKELY:
        return "likely worse"
    return "no clear difference"


def verdict_phrase(verdict: str, primary_row: dict[str, Any]) -> str:
    """The verdict as a reader should take it: ``most likely worse (in 92% of resamples)``."""
    share = primary_row.get("share_better")
    if verdict.startswith("likely ") and share is not None:
        side = share if verdict == "likely better" else 1 - share
        return f"most {verdict} (in {side:.0%} of resamples), though not certain"
    return verdict


def overall_verdict(baseline: str, primary: Metric,
                    results: Sequence[tuple[str, str, dict[str, Any]]]) -> str:
    """One short sentence over the as-logged comparisons: (candidate, verdict, primary row).

    Example:
        >>> from hpcpolicy.whatif.compare import METRICS
        >>> overall_verdict("fcfs+easy", METRICS[0], [("sjf+easy", "better",
        ...     {"diff": -5.0, "baseline": 10.0})])
        'Against fcfs+easy, as logged, on mean bounded slowdown: sjf+easy better (-50%).'
    """
    if not results:
        return "no candidate was compared with the baseline"
    parts = [f"{spec} {verdict} ({relative_change(row)})" for spec, verdict, row in results]
    return f"Against {baseline}, as logged, on {primary.label}: " + "; ".join(parts) + "."
