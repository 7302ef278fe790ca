"""The words of a comparison: its verdict, its one-sentence summary and its trade-offs.

A comparison's verdict follows its primary metric (``--metric``, default mean bounded
slowdown): better or worse only where the bootstrap interval excludes zero. A candidate that
is better on the primary metric but worse on another compared metric, or that makes a group
of jobs wait materially longer (:func:`hpcpolicy.whatif.breakdowns.notable_losers`), is
**mixed**: the trade-offs are listed, never hidden.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hpcpolicy.textfmt import duration, signed_percent
from hpcpolicy.whatif.breakdowns import notable_losers
from hpcpolicy.whatif.compare import Metric

__all__ = ["comparison_verdict", "format_value", "metric_sentence", "overall_verdict",
           "relative_change", "relative_interval", "tradeoffs"]

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
            found.append(f"{more} more {kind}{plural} also wait materially longer")
    return found


def comparison_verdict(primary_verdict: str, found_tradeoffs: Sequence[str]) -> str:
    """better / worse / no clear difference, or mixed (better, with trade-offs)."""
    if primary_verdict == "better" and found_tradeoffs:
        return "mixed"
    return primary_verdict


def overall_verdict(baseline: str, results: Sequence[tuple[str, str, str]]) -> str:
    """One sentence over the as-logged comparisons: (candidate, verdict, primary sentence)."""
    if not results:
        return "no candidate was compared with the baseline"
    parts = [f"{spec}: {verdict} ({text})" for spec, verdict, text in results]
    return f"Against {baseline} on the log as it was: " + "; ".join(parts) + "."
