"""The what-if report as one self-contained HTML page (``report.html``).

The page reads top-down the way a cluster administrator decides: the verdict, the comparison
with confidence intervals, the trade-offs, the figures, how far the simulator can be trusted on
this log, and the notes. It needs no network: CSS is inline, figures are inline SVG drawn by
:mod:`hpcpolicy.whatif.plots`, and there is no script.

Everything from the report (job, user and partition names, specs, sentences, paths) goes through
Jinja2's autoescaping; only the SVG we generated is inserted as markup. The same ``doc`` and
``outcomes`` give the same bytes: nothing depends on the clock or on dict order beyond the
report's own.
"""

from __future__ import annotations

import math
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpcpolicy.atomic import write_text
from hpcpolicy.textfmt import time_unit, visible
from hpcpolicy.whatif import slurm_section
from hpcpolicy.whatif.plots import (
    draw_plots,
    metric_info,
    primary_comparisons,
    run_colours,
    runs_of,
    scenario_labels,
)

if TYPE_CHECKING:
    import jinja2
    import polars as pl

    from hpcpolicy.whatif.plots import Outcomes

__all__ = ["AFFECTED_JOBS", "render_html", "write_html"]

AFFECTED_JOBS = 5
"""Jobs listed in each of the "waited longer" and "waited less" tables."""

TEMPLATE = "report.html.j2"

_VERDICT_CLASS = {"better": "better", "worse": "worse", "mixed": "mixed",
                  "likely better": "better", "likely worse": "worse",
                  "no clear difference": "neutral", "no difference": "neutral",
                  "identical": "neutral"}
"""CSS class of each comparison verdict."""

_MINUS = "\u2212"
"""A real minus sign, as wide as the plus, for signed numbers."""

_NBSP = "\u00a0"
"""No-break space, between a number and its unit."""


def render_html(doc: dict[str, Any], outcomes: Outcomes) -> str:
    """The report page as text.

    Args:
        doc: the what-if report (``report.json`` content).
        outcomes: one row per (run, job), ``run`` then the outcome columns, or one query
            per run (:func:`hpcpolicy.whatif.plots.runs_of`).

    Returns:
        One self-contained HTML document.

    Example:
        >>> page = render_html(doc, outcomes)  # doctest: +SKIP
        >>> page.startswith("<!DOCTYPE html>")  # doctest: +SKIP
        True
    """
    template = _environment().get_template(TEMPLATE)
    return template.render(_context(doc, outcomes))


def write_html(path: str | os.PathLike[str], doc: dict[str, Any], outcomes: Outcomes) -> Path:
    """Render the report and write it to ``path`` atomically; return the path."""
    path = Path(path)
    write_text(path, render_html(doc, outcomes))
    return path


def _environment() -> jinja2.Environment:
    """Jinja2 with autoescaping on, strict about undefined names, and the report's filters."""
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("hpcpolicy.whatif", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        finalize=_shown,
    )
    env.filters.update(duration=duration, signed_duration=signed_duration, value=metric_value,
                       change=metric_change, rel=relative, number=number, when=when)
    return env


def _shown(value: Any) -> Any:
    """Every text the template prints, made visible and cut (:func:`visible`) before Jinja
    escapes it; markup we generated (the SVG figures) passes unchanged."""
    import markupsafe

    if isinstance(value, str) and not isinstance(value, markupsafe.Markup):
        return visible(value)
    return value


def _context(doc: dict[str, Any], outcomes: Outcomes) -> dict[str, Any]:
    """What the template shows: the report itself plus the joins and tables it needs."""
    runs = runs_of(outcomes)
    comparisons = [_comparison_view(doc, c) for c in doc["comparisons"]]
    # the page dwells on the best candidate of the first scenario, whatever the order of -c
    best = primary_comparisons(doc)[:1]
    primary = _comparison_view(doc, best[0]) if best else None
    return {
        "doc": doc,
        "verdict_class": doc["headline"]["class"],
        "primary": primary,
        "comparisons": comparisons,
        "runs": _run_rows(doc),
        "affected": _affected_jobs(runs, best[0]) if best else None,
        "plots": draw_plots(doc, runs),
        "windows": max((c["windows"] for c in doc["comparisons"]), default=0),
        "slurm": slurm_section.html_context(doc),
    }


# --- joins for the template --------------------------------------------------------------------


def _comparison_view(doc: dict[str, Any], comparison: dict[str, Any]) -> dict[str, Any]:
    """A comparison with its runs, scenario label and per-metric rows (label and unit joined)."""
    runs = {r["id"]: r for r in doc["runs"]}
    rows = [{**metric_info(doc, m["key"]), **m,
             "verdict_class": _VERDICT_CLASS.get(m["verdict"], "neutral")}
            for m in comparison["metrics"]]
    return {**comparison, "rows": rows,
            "baseline": runs[comparison["baseline_run"]],
            "candidate": runs[comparison["candidate_run"]],
            "scenario_label": scenario_labels(doc).get(comparison["scenario"],
                                                       comparison["scenario"]),
            "verdict_class": _VERDICT_CLASS.get(comparison["verdict"], "neutral")}


def _run_rows(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """Every run with its plot colour and scenario label, in the report's order."""
    colours = run_colours(doc)
    labels = scenario_labels(doc)
    return [{**run, "colour": colours[run["id"]],
             "scenario_label": labels.get(run["scenario"], run["scenario"])}
            for run in doc["runs"]]


def _affected_jobs(runs: dict[str, pl.LazyFrame], comparison: dict[str, Any]
                   ) -> dict[str, list[dict[str, Any]]] | None:
    """The jobs whose wait grew most and shrank most under the candidate.

    Both runs replay the same workload, so their rows are the same jobs in the same order;
    None when they are not (the tables are then left out, with a word why).
    """
    import polars as pl

    keys = ["job_id", "submit"]
    base = runs[comparison["baseline_run"]].select(
        "job_id", "user", "partition", "procs", "submit", "wait").collect()
    cand = runs[comparison["candidate_run"]].select(*keys, "wait").collect()
    if not base.select(keys).equals(cand.select(keys)):
        return None
    jobs = base.select(
        "job_id", "user", "partition", "procs", "submit",
        pl.col("wait").alias("baseline_wait"),
        cand["wait"].alias("candidate_wait"),
        (cand["wait"] - pl.col("wait")).alias("change"),
    ).with_row_index("position").drop_nulls("change")
    longer = jobs.filter(pl.col("change") > 0).sort(["change", "position"],
                                                    descending=[True, False])
    shorter = jobs.filter(pl.col("change") < 0).sort(["change", "position"])
    return {"longer": longer.head(AFFECTED_JOBS).to_dicts(),
            "shorter": shorter.head(AFFECTED_JOBS).to_dicts()}


# --- formatting (template filters) -------------------------------------------------------------


def duration(seconds: float | None) -> str:
    """A duration for a reader: ``45 s``, ``12.5 min``, ``3.4 h``, ``8.9 d``; a dash if unknown.

    Number and unit are joined by a no-break space, so a table cell never splits them.

    Example:
        >>> duration(5400)
        '1.5\xa0h'
    """
    if seconds is None or math.isnan(seconds):
        return "\u2013"
    scale, unit = time_unit(seconds)
    size = round(abs(seconds) / scale, 0 if scale == 1 else 1)
    if size == 0:
        return f"0{_NBSP}s"
    text = f"{size:.0f}{_NBSP}s" if scale == 1 else f"{size:.1f}{_NBSP}{unit}"
    return _MINUS + text if seconds < 0 else text


def signed_duration(seconds: float | None) -> str:
    """A duration with its sign always shown: ``+3.4 h``, ``-12.0 min`` (a true minus), ``0 s``."""
    text = duration(seconds)
    return "+" + text if seconds is not None and seconds > 0 else text


def number(value: float | None, signed: bool = False, digits: int | None = None) -> str:
    """A plain number; unless told, with digits to suit its size (2 below 10, 1 below 1000,
    else none)."""
    if value is None or math.isnan(value):
        return "\u2013"
    if digits is None:
        digits = 2 if abs(value) < 10 else 1 if abs(value) < 1000 else 0
    text = f"{abs(value):,.{digits}f}"
    if not text.strip("0.,"):  # rounds to zero: no sign
        return text
    sign = _MINUS if value < 0 else "+" if signed else ""
    return sign + text


def metric_value(value: float | None, unit: str) -> str:
    """A metric's value in its unit: durations, percentages for shares, else a number."""
    if unit == "s":
        return duration(value)
    if unit == "share":
        return "\u2013" if value is None else number(value * 100) + "%"
    return number(value)


def metric_change(value: float | None, unit: str) -> str:
    """A change of a metric, signed: durations, percentage points for shares, else a number."""
    if unit == "s":
        return signed_duration(value)
    if unit == "share":
        return "\u2013" if value is None else number(value * 100, signed=True) + _NBSP + "pp"
    return number(value, signed=True)


def relative(value: float | None) -> str:
    """A relative change as a signed percentage: ``-38.0%`` (a true minus)."""
    return "\u2013" if value is None else number(value * 100, signed=True, digits=1) + "%"


def when(value: str | int, origin: int | None = None) -> str:
    """A time for a reader, in UTC: an ISO string, or seconds since ``origin``."""
    if isinstance(value, str):
        moment = datetime.fromisoformat(value)
        if moment.tzinfo is None:  # the report writes UTC; never read it as local time
            moment = moment.replace(tzinfo=UTC)
    else:
        moment = datetime.fromtimestamp((origin or 0) + value, tz=UTC)
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")
