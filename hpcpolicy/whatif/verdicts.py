"""The words of a comparison: its verdict, its one-sentence summary and its trade-offs.

A comparison's verdict follows its primary metric (``--metric``, default mean bounded
slowdown):

* **identical**: the candidate replays exactly as the baseline (every job starts and ends at
  the same time), as a guarded policy whose fallback ran does;
* **no difference**: the primary metric ties in every resample;
* **better** / **worse**: the primary metric's interval lies wholly on that side of zero,
  and no other compared metric is clearly on the opposite side;
* **mixed**: clearly better on one of the two (the primary metric or another one) and
  clearly worse on the other;
* **likely better** / **likely worse**: the interval straddles zero, but at least
  :data:`LIKELY` of the bootstrap resamples are wins (``share_better``) or losses
  (``share_worse``); a tie counts as neither;
* **no clear difference**: otherwise.

Groups of jobs that wait materially longer
(:func:`hpcpolicy.whatif.breakdowns.notable_losers`) are listed as trade-offs beside any
verdict, never hidden, but do not change it: nearly every change of policy makes some user
wait longer.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from hpcpolicy.textfmt import duration, signed_percent
from hpcpolicy.whatif.breakdowns import notable_losers
from hpcpolicy.whatif.compare import Metric

__all__ = ["LIKELY", "VERDICTS", "absolute_change", "comparison_verdict", "format_value",
           "headline", "metric_sentence", "relative_change", "relative_interval",
           "tradeoffs", "verdict_phrase"]

LIKELY = 0.8
"""Share of bootstrap resamples on one side that makes an unclear change *likely* so."""
VERDICTS = ("better", "likely better", "mixed", "no clear difference", "no difference",
            "identical", "likely worse", "worse")
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
    """The whole-run change as a signed percentage of the baseline (``-`` where no ratio is
    taken: :data:`hpcpolicy.whatif.compare.RATIO_FLOOR`)."""
    return "-" if row.get("rel_diff") is None else signed_percent(row["rel_diff"])


def relative_interval(row: dict[str, Any]) -> str:
    """``-45% .. -30%``, or ``-`` where no interval was computed."""
    if row["rel_ci_low"] is None:
        return "-"
    return f"{signed_percent(row['rel_ci_low'])} .. {signed_percent(row['rel_ci_high'])}"


def absolute_change(metric: Metric, value: float) -> str:
    """A signed change in the metric's unit: ``+5.0m``, ``-0.12``."""
    return ("-" if value < 0 else "+") + format_value(metric, abs(value))


def _change(primary: Metric, row: dict[str, Any], confidence: float, *,
            interval: bool) -> str:
    """The primary metric's change, relative where a ratio is taken, with its interval if
    asked: ``-50%, 95% CI -60% .. -40%``."""
    if row.get("rel_note") and row["diff"] is not None:
        text = absolute_change(primary, row["diff"])
        if interval and row["ci_low"] is not None:
            text += (f", {confidence:.0%} CI {absolute_change(primary, row['ci_low'])} .. "
                     f"{absolute_change(primary, row['ci_high'])}")
        return text
    text = relative_change(row)
    if interval and row["rel_ci_low"] is not None:
        text += f", {confidence:.0%} CI {relative_interval(row)}"
    return text


def metric_sentence(metric: Metric, row: dict[str, Any], confidence: float) -> str:
    """``mean wait 2.1h -> 1.4h (-33%, 95% CI -40% .. -25%)``; where the baseline is too small
    to divide by, the change and its interval in the metric's unit, and why."""
    text = (f"{metric.label} {format_value(metric, row['baseline'])} -> "
            f"{format_value(metric, row['candidate'])} "
            f"({_change(metric, row, confidence, interval=True)}")
    if row.get("rel_note") and row["diff"] is not None:
        text += f"; {row['rel_note']}"
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
                       primary: str, *, identical: bool = False) -> str:
    """The comparison's verdict from its metric rows (the rules are in the module docstring);
    ``identical``: the two runs started and ended every job at the same time."""
    if identical:
        return "identical"
    main = next(r for m, r in zip(metrics, rows, strict=True) if m.key == primary)
    others = {r["verdict"] for m, r in zip(metrics, rows, strict=True) if m.key != primary}
    if main["verdict"] in ("better", "worse"):
        opposite = "worse" if main["verdict"] == "better" else "better"
        return "mixed" if opposite in others else str(main["verdict"])
    if main["verdict"] == "no difference":
        return "no difference"
    for side in ("better", "worse"):
        share = main.get(f"share_{side}")
        if share is not None and share >= LIKELY:
            return f"likely {side}"
    return "no clear difference"


def verdict_phrase(verdict: str, primary_row: dict[str, Any]) -> str:
    """The verdict as a reader should take it: ``most likely worse (in 92% of resamples)``."""
    if verdict.startswith("likely "):
        share = primary_row.get(f"share_{verdict.removeprefix('likely ')}")
        if share is not None:
            return f"most {verdict} (in {share:.0%} of resamples), though not certain"
    if verdict == "identical":
        return "identical: every job starts and ends as under the baseline"
    return verdict


Result = tuple[str, str, str, dict[str, Any]]
"""One comparison as the headline sees it: (scenario id, candidate, verdict, primary row)."""

_GOOD_ENOUGH = frozenset(VERDICTS) - {"worse", "likely worse"}
"""Verdicts a best candidate may have (it must also improve the primary metric)."""


def _rank_key(primary: Metric, result: Result) -> tuple[float, float, str]:
    """Best first: the pessimistic end of the primary metric's interval (its whole-log change
    without one), then that change, then the name (so equal candidates keep one order)."""
    _, name, _, row = result
    sign = 1.0 if primary.better == "lower" else -1.0
    diff = sign * (row["diff"] if row["diff"] is not None else math.inf)
    ends = [sign * x for x in (row["ci_low"], row["ci_high"]) if x is not None]
    return (max(ends) if ends else diff, diff, name)


def headline(baseline: str, primary: Metric, labels: dict[str, str],
             results: Sequence[Result], *, confidence: float) -> dict[str, Any]:
    """The report's headline over every comparison: a sentence that names, for each scenario,
    the best candidate by the primary metric and its interval, then the others; a badge that
    counts the verdicts; the best candidate of each scenario (None where none beats the
    baseline). The order of ``results`` changes nothing.

    Args:
        baseline: the baseline's spec.
        primary: the metric that decides the verdicts.
        labels: scenario id -> its label, in the report's order.
        results: every comparison (:data:`Result`).
        confidence: the intervals' level.

    Returns:
        ``{"sentence", "badge", "class", "best", "ranked"}``; ``class`` is ``better``,
        ``worse``, ``mixed`` (verdicts on both sides) or ``neutral``; ``ranked``: scenario id ->
        its candidates, best first.

    Example:
        >>> from hpcpolicy.whatif.compare import METRICS
        >>> row = {"diff": -5.0, "rel_diff": -0.5, "ci_low": None, "ci_high": None,
        ...        "rel_ci_low": None}
        >>> headline("fcfs+easy", METRICS[0], {"as-logged": "as logged"},
        ...          [("as-logged", "sjf+easy", "better", row)], confidence=0.95)["sentence"]
        'Against fcfs+easy on mean bounded slowdown. As logged: best sjf+easy, better (-50%).'
    """
    if not results:
        return {"sentence": "No candidate was compared with the baseline.",
                "badge": "no comparison", "class": "neutral", "best": {}, "ranked": {}}
    parts, best, order = [], {}, {}
    for scenario, label in labels.items():
        ranked = sorted((r for r in results if r[0] == scenario),
                        key=lambda r: _rank_key(primary, r))
        if not ranked:
            continue
        top = ranked[0]
        order[scenario] = [r[1] for r in ranked]
        sign = 1.0 if primary.better == "lower" else -1.0
        wins = top[2] in _GOOD_ENOUGH and top[3]["diff"] is not None and \
            sign * top[3]["diff"] < 0
        best[scenario] = top[1] if wins else None
        words = []
        if wins:
            words.append(f"best {top[1]}, {top[2]} "
                         f"({_change(primary, top[3], confidence, interval=True)})")
            ranked = ranked[1:]
        else:
            words.append("no candidate beats the baseline")
        words += [f"{name} {verdict} ({_change(primary, row, confidence, interval=False)})"
                  for _, name, verdict, row in ranked]
        parts.append(f"{label[:1].upper()}{label[1:]}: " + "; ".join(words) + ".")
    counts = {v: sum(1 for r in results if r[2] == v) for v in VERDICTS}
    good = counts["better"] + counts["likely better"]
    bad = counts["worse"] + counts["likely worse"]
    cls = "mixed" if counts["mixed"] or (good and bad) else \
        "better" if good else "worse" if bad else "neutral"
    return {"sentence": f"Against {baseline} on {primary.label}. " + " ".join(parts),
            "badge": ", ".join(f"{n} {v}" for v, n in counts.items() if n),
            "class": cls, "best": best, "ranked": order}
