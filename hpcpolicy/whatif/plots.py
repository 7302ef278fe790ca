"""The what-if report's figures, drawn with matplotlib and returned as inline SVG text.

Each figure is drawn on its own :class:`matplotlib.figure.Figure` (no pyplot, so no GUI
backend and no global figure state) under matplotlib's default style plus :data:`_RC`, whatever
the user's matplotlibrc says. Output is deterministic: ids come from a fixed hash salt, the SVG
carries no date or creator, and large inputs are thinned by position, never at random.

Names from the logs (users, partitions, specs) are drawn as glyph paths (``svg.fonttype
"path"``) with mathtext off, so a name is neither markup nor a formula. Each SVG's ids
get a per-figure prefix, so several SVGs can share one HTML document.

Colours come from the Okabe-Ito palette (colour-blind safe): the baseline is always dark grey,
each candidate spec keeps one colour in every figure, and better/worse are green/vermillion.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import math
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from hpcpolicy.textfmt import time_unit, visible

if TYPE_CHECKING:
    from typing import TypeAlias

    import polars as pl
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    Outcomes: TypeAlias = "pl.DataFrame | Mapping[str, pl.LazyFrame]"

__all__ = [
    "BASELINE_COLOUR",
    "ECDF_POINTS",
    "MAX_POINTS",
    "Plot",
    "draw_plots",
    "metric_info",
    "primary_comparisons",
    "run_colours",
    "runs_of",
    "scenario_labels",
]

BASELINE_COLOUR = "#4d4d4d"
"""The baseline run's colour in every figure."""

CANDIDATE_COLOURS = ("#0072B2", "#E69F00", "#CC79A7", "#56B4E9", "#009E73", "#D55E00", "#F0E442")
"""Okabe-Ito colours for the candidate specs, in the order of ``config.candidates``."""

BETTER_COLOUR, WORSE_COLOUR = "#009E73", "#D55E00"
"""Bars for a group or window where the candidate did better / worse than the baseline."""

ECDF_POINTS = 512
"""Quantile points that trace one distribution curve."""

MAX_POINTS = 5000
"""Most points in one scatter plot (beyond this, jobs evenly spaced in job order)."""

MAX_WINDOW_BARS = 250
"""Most bars in one per-window panel: beyond this (a log of years in weekly windows), each
bar is the mean change over a run of consecutive windows, and the caption says how many."""

MAX_MONTHS = 48
"""Most months in the fidelity panel; beyond this, months are pooled in runs (jobs-weighted
mean waits, the largest of the monthly median errors), and the panel's title says so."""

MAX_SERIES_POINTS = 150
"""Most points in one time series line (consecutive bins are averaged beyond this), so that
several overlaid policies stay readable."""

SPREAD_FOR_LOG = 30.0
"""Class means this many times apart (largest / smallest) get a log axis, so that the small
classes stay readable."""

LABEL_CHARS = 24
"""Names longer than this are cut, with an ellipsis, in plot labels."""

_WIDE, _PANEL_H = 10.0, 3.4
"""Figure width and the height of one row of panels (inches)."""

_RC: dict[str, Any] = {
    "svg.hashsalt": "hpcpolicy-whatif",
    "svg.fonttype": "path",
    "text.usetex": False,
    "text.parse_math": False,
    "font.family": "DejaVu Sans",
    "font.size": 9,
    "axes.titlesize": 10,
    "axes.titleweight": "bold",
    "axes.titlelocation": "left",
    "axes.labelsize": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "axes.axisbelow": True,
    "grid.color": "#e3e3e3",
    "grid.linewidth": 0.6,
    "legend.frameon": False,
    "legend.fontsize": 8.5,
}

_RASTER_DPI = 150
"""Resolution of the parts drawn as an image (the fidelity scatter's dots)."""

_SVG_METADATA = {"Date": None, "Creator": None, "Format": None, "Type": None}
"""No metadata block: no date (determinism) and no URLs."""

_LOG_TICKS = (
    (1, "1 s"), (10, "10 s"), (60, "1 min"), (600, "10 min"), (3600, "1 h"), (6 * 3600, "6 h"),
    (86400, "1 d"), (7 * 86400, "1 wk"), (30 * 86400, "30 d"), (365 * 86400, "1 yr"),
)
"""Tick marks for a logarithmic axis of durations."""

"""(seconds per unit, unit name), largest first: a duration of at least one unit is shown in
it; below a minute, in seconds."""


@dataclass(frozen=True)
class Plot:
    """One figure of the report, or the reason it could not be drawn.

    Attributes:
        key: a short id, unique in the report (also the HTML anchor).
        title: what the figure shows, as a heading.
        caption: how to read it, in a sentence or two.
        svg: the drawing (inline SVG markup we generated), or None when it could not be drawn.
        missing: why it could not be drawn, for the reader; None when drawn.
    """

    key: str
    title: str
    caption: str
    svg: str | None = None
    missing: str | None = None


def run_colours(doc: dict[str, Any]) -> dict[str, str]:
    """Each run's colour: dark grey for a baseline, one palette colour per candidate spec."""
    specs = list(doc["config"]["candidates"])
    colours = {}
    for run in doc["runs"]:
        if run["role"] == "baseline" or run["spec"] not in specs:
            colours[run["id"]] = BASELINE_COLOUR
        else:
            index = specs.index(run["spec"]) % len(CANDIDATE_COLOURS)
            colours[run["id"]] = CANDIDATE_COLOURS[index]
    return colours


def scenario_labels(doc: dict[str, Any]) -> dict[str, str]:
    """Scenario id -> its label (the id when it has none)."""
    return {s["id"]: s.get("label") or s["id"] for s in doc["scenarios"]}


def metric_info(doc: dict[str, Any], key: str) -> dict[str, Any]:
    """The report's description of metric ``key`` (label, unit, better); a plain one when the
    report does not list it."""
    for metric in doc["metrics"]:
        if metric["key"] == key:
            return dict(metric)
    return {"key": key, "label": key, "unit": "", "better": "lower"}


def runs_of(outcomes: Outcomes) -> dict[str, pl.LazyFrame]:
    """Run id -> that run's outcome rows, as a query.

    ``outcomes`` is one table of every run (a ``run`` id column first, as
    ``outcomes.parquet``), split here, or already one query per run
    (:meth:`hpcpolicy.whatif.WhatifResult.run_outcomes`, read only as far as a plot needs).
    """
    if isinstance(outcomes, Mapping):
        return dict(outcomes)
    return {str(key[0]): frame.lazy() for key, frame in
            outcomes.partition_by("run", as_dict=True, maintain_order=True).items()}


def draw_plots(doc: dict[str, Any], outcomes: Outcomes) -> dict[str, Plot]:
    """Every figure of the report, by key, in reading order.

    Args:
        doc: the what-if report (``report.json`` content).
        outcomes: the runs' outcomes (:func:`runs_of`).

    Returns:
        ``wait_ecdf``, ``bsld_ecdf``, ``size_class``, ``runtime_class``, ``utilization``,
        ``queue_length``, ``winners``, ``per_window``, ``fidelity``; each drawn or saying why not.
    """
    frames = runs_of(outcomes)
    primary = primary_comparisons(doc)
    with _style():
        plots = [
            _distribution_plot(doc, frames, "wait"),
            _distribution_plot(doc, frames, "bsld"),
            _class_plot(doc, primary, "size_class"),
            _class_plot(doc, primary, "runtime_class"),
            _series_plot(doc, "utilization"),
            _series_plot(doc, "queue_length"),
            _winners_plot(doc, primary),
            _window_plot(doc, primary),
            _fidelity_plot(doc, frames),
        ]
    return {plot.key: plot for plot in plots}


# --- shared drawing machinery ------------------------------------------------------------------


@contextlib.contextmanager
def _style() -> Iterator[None]:
    """matplotlib defaults plus :data:`_RC`, independent of the user's settings, restored after."""
    import matplotlib.style

    with matplotlib.style.context(["default", _RC], after_reset=True):
        yield


def _figure(rows: int = 1, cols: int = 1, *, height: float = _PANEL_H, **kw: Any) -> tuple[
        Figure, list[Axes]]:
    """A new figure of ``rows`` x ``cols`` panels, full report width, constrained layout."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(_WIDE, height * rows), layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False, **kw)
    return fig, list(axes.flat)


def _svg(fig: Figure, key: str) -> str:
    """The figure as SVG markup ready to inline in HTML (see :func:`_inline`)."""
    _declutter(fig)
    _tag_marks(fig)
    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata=_SVG_METADATA, dpi=_RASTER_DPI)
    return _inline(buf.getvalue(), key)


_GAP_PX = 10.0
"""Least room between two tick labels, or two axis titles, at the figure's own size."""


def _declutter(fig: Figure) -> None:
    """Lay the figure out and make sure nothing is drawn over anything else: every axis
    keeps one tick label in 2, 3, ... until its labels stand apart (the ticks stay), and an
    axis title wider than its panel wraps onto more lines, so side-by-side panels' titles
    do not run into each other."""
    import textwrap

    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.ticker import FixedFormatter, FixedLocator

    renderer = FigureCanvasAgg(fig).get_renderer()  # type: ignore[no-untyped-call]
    fig.draw_without_rendering()
    for ax in (a for a in fig.axes if a.get_visible()):
        width = ax.get_window_extent(renderer).width
        label = ax.xaxis.label
        if label.get_text() and label.get_window_extent(renderer).width > width:
            chars = max(12, int(len(label.get_text()) * width
                                / label.get_window_extent(renderer).width) - 2)
            label.set_text(textwrap.fill(label.get_text(), chars))
        for axis, along in ((ax.xaxis, 0), (ax.yaxis, 1)):
            locs = list(axis.get_majorticklocs())
            texts = [t.get_text() for t in axis.get_ticklabels()]
            boxes = [t.get_window_extent(renderer) for t in axis.get_ticklabels()]
            if len(texts) != len(locs) or len(locs) < 2:
                continue
            lo, hi = sorted(axis.get_view_interval())
            shown = [i for i, v in enumerate(locs) if lo <= v <= hi and texts[i]]
            step = 1
            while step < len(shown) and _touching([boxes[i] for i in shown[::step]], along):
                step += 1
            if step > 1:
                kept = set(shown[::step])
                axis.set_major_locator(FixedLocator(locs))
                axis.set_major_formatter(FixedFormatter(
                    [t if i in kept else "" for i, t in enumerate(texts)]))
    fig.draw_without_rendering()


def _touching(boxes: Sequence[Any], along: int) -> bool:
    """Whether two neighbouring, non-empty boxes come closer than :data:`_GAP_PX` along x
    (``along`` 0) or y (1)."""
    spans = sorted((b.x0, b.x1) if along == 0 else (b.y0, b.y1)
                   for b in boxes if b.width > 0 and b.height > 0)
    return any(nxt[0] - cur[1] < _GAP_PX for cur, nxt in itertools.pairwise(spans))


_REFERENCE = "_reference"
"""Label of a line drawn whatever the data (zero, the diagonal): not a data mark."""


def _tag_marks(fig: Figure) -> None:
    """Give every data artist an id ``mark-<axes>-<n>``, so a test can tell that data was
    drawn (reference lines get none)."""
    for a, ax in enumerate(fig.axes):
        for n, artist in enumerate([*ax.lines, *ax.collections, *ax.patches]):
            if artist.get_label() != _REFERENCE:
                artist.set_gid(f"mark-{a}-{n}")


_PROLOG = re.compile(r"\A.*?(?=<svg[\s>])", re.S)
_COMMENT = re.compile(r"<!--.*?-->\n?", re.S)
_XMLNS = re.compile(r'\s+xmlns(?::\w+)?="[^"]*"')
_GLOBAL_STYLE = re.compile(r"\s*<style[^>]*>.*?</style>", re.S)
_ID_REF = re.compile(r'(\bid="|href="#|url\(#)')


def _inline(svg: str, key: str) -> str:
    """Matplotlib's SVG document as an element for an HTML page.

    Drops the XML prolog and doctype, comments (matplotlib writes each text there), namespace
    declarations (the HTML parser supplies them) and the document-wide ``<style>`` (the page's
    CSS sets the same); prefixes every id and id reference with ``key``, so that figures never
    share an id.
    """
    svg = _PROLOG.sub("", svg)
    svg = _COMMENT.sub("", svg)
    svg = _XMLNS.sub("", svg)
    svg = _GLOBAL_STYLE.sub("", svg)
    svg = _ID_REF.sub(lambda m: f"{m.group(1)}{key}-", svg)
    return svg.replace("<defs>\n </defs>\n", "").strip()


def _label(name: str, chars: int = LABEL_CHARS) -> str:
    """A name as a plot label: one line, at most ``chars`` characters."""
    name = " ".join(visible(name).split())
    return name if len(name) <= chars else name[: chars - 1] + "…"


def _run_label(run: dict[str, Any]) -> str:
    """How a run is named in a legend: its spec, marked when it is the baseline."""
    suffix = " (baseline)" if run["role"] == "baseline" else ""
    return _label(run["spec"], 40) + suffix


def _duration_axis(axis: Any, top: float, ticks: int = 5) -> str:
    """Label a linear duration axis reaching ``top`` seconds in the unit that suits it, with
    about ``ticks`` round ticks of that unit; return the unit's name."""
    from matplotlib.ticker import FuncFormatter, MultipleLocator

    scale, unit = time_unit(top)
    axis.set_major_locator(MultipleLocator(_nice_step(top / scale / ticks) * scale))
    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v / scale:g}"))
    return unit


def _nice_step(raw: float) -> float:
    """The smallest round step (1, 2 or 5 times a power of ten) at least ``raw``.

    Example:
        >>> _nice_step(3.7)
        5.0
    """
    power = 10.0 ** math.floor(math.log10(raw)) if raw > 0 else 1.0
    return next(m * power for m in (1.0, 2.0, 5.0, 10.0) if m * power >= raw)


def _log_duration_axis(axis: Any, lo: float, hi: float, *, coarse: bool = False) -> None:
    """Put human duration ticks (1 s, 1 min, 1 h, 1 d ...) on a log axis spanning lo..hi s;
    ``coarse`` keeps one tick per unit, for a narrow axis."""
    from matplotlib.ticker import FixedLocator, NullLocator

    ticks = [(v, text) for v, text in _LOG_TICKS
             if lo <= v <= hi and not (coarse and not text.startswith("1 "))]
    axis.set_major_locator(FixedLocator([v for v, _ in ticks]))
    axis.set_ticklabels([text for _, text in ticks])
    axis.set_minor_locator(NullLocator())


def _plain_log_axis(axis: Any, *, fine: bool = False) -> None:
    """Plain numbers (1, 10, 100) rather than powers of ten on a log axis; ``fine`` adds 2 and
    5 times each power, for an axis that spans few of them."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter, NullLocator

    if fine:
        axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        axis.set_minor_locator(NullLocator())
    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}" if v >= 1 else f"{v:g}"))
    axis.set_minor_formatter(NullFormatter())


def _dates(origin: int, seconds: npt.ArrayLike) -> npt.NDArray[np.datetime64]:
    """Seconds since the log's origin as UTC datetimes."""
    return (np.asarray(seconds, dtype=np.int64) + origin).astype("datetime64[s]")


def _date_axis(axis: Any) -> None:
    """Concise date ticks, in UTC whatever the user's matplotlib timezone."""
    import matplotlib.dates as mdates

    locator = mdates.AutoDateLocator(tz="UTC", minticks=3, maxticks=9)  # type: ignore[no-untyped-call]
    axis.set_major_locator(locator)
    axis.set_major_formatter(mdates.ConciseDateFormatter(locator, tz="UTC"))  # type: ignore[no-untyped-call]


def _values(items: Sequence[Any]) -> npt.NDArray[np.float64]:
    """Numbers with None as NaN (matplotlib leaves NaN undrawn)."""
    return np.array([math.nan if v is None else float(v) for v in items], dtype=np.float64)


def _finite_max(values: npt.NDArray[np.float64], default: float = 1.0) -> float:
    """The largest finite absolute value, or ``default`` when there is none."""
    finite = np.abs(values[np.isfinite(values)])
    return float(finite.max()) if finite.size and finite.max() > 0 else default


def _grid(n: int, most: int = 3) -> tuple[int, int]:
    """Rows and columns for ``n`` panels, at most ``most`` a row."""
    cols = min(n, most)
    return math.ceil(n / cols), cols


def _scenario_label(doc: dict[str, Any], scenario_id: str) -> str:
    """A scenario's label as a panel title."""
    return _label(scenario_labels(doc).get(scenario_id, scenario_id), 60)


def primary_comparisons(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """The comparisons of the first compared scenario (as-logged), one per candidate, the
    best first (the headline's ranking), so that the order of ``-c`` does not choose which
    one the page dwells on."""
    comparisons = doc["comparisons"]
    if not comparisons:
        return []
    scenario = comparisons[0]["scenario"]
    ranked = doc["headline"]["ranked"].get(scenario, [])
    found = [c for c in comparisons if c["scenario"] == scenario]
    runs = {r["id"]: r["spec"] for r in doc["runs"]}
    return sorted(found, key=lambda c: ranked.index(runs[c["candidate_run"]]))


def _runs_by_scenario(doc: dict[str, Any]) -> list[tuple[str, list[dict[str, Any]]]]:
    """(scenario id, its runs, baseline first), in the report's scenario order."""
    order = [s["id"] for s in doc["scenarios"]]
    order += [r["scenario"] for r in doc["runs"] if r["scenario"] not in order]
    grouped = []
    for scenario in dict.fromkeys(order):
        runs = [r for r in doc["runs"] if r["scenario"] == scenario]
        runs.sort(key=lambda r: r["role"] != "baseline")
        if runs:
            grouped.append((scenario, runs))
    return grouped


def _legend(fig: Figure, axes: list[Axes]) -> None:
    """One legend for the figure, under the panels, from the first panel that has entries."""
    for ax in axes:
        handles, labels = ax.get_legend_handles_labels()
        if handles:
            fig.legend(handles, labels, loc="outside lower center",
                       ncols=min(len(handles), 4))
            return


# --- distributions -----------------------------------------------------------------------------

_DISTRIBUTION = {
    "wait": ("Waiting time: share of jobs that waited at most x",
             "wait before start (log scale)",
             "Each curve is one policy; higher and further left is better. Waits under 1 s "
             "are drawn at 1 s, so the curve's height at the left edge is the share of jobs "
             "that started at once."),
    "bsld": ("Bounded slowdown: share of jobs slowed down at most x times",
             "bounded slowdown = (wait + run) / max(run, 10 s) (log scale)",
             "Each curve is one policy; higher and further left is better. A slowdown of 1 "
             "means no wait; 10 means the job spent ten times its run time in the system."),
}


def _distribution_plot(doc: dict[str, Any], frames: dict[str, pl.LazyFrame],
                       column: str) -> Plot:
    """ECDF of a per-job outcome (``wait`` or ``bsld``) for each run, one panel per scenario."""
    title, xlabel, caption = _DISTRIBUTION[column]
    key = f"{column}_ecdf"
    panels = [(scenario, curves) for scenario, runs in _runs_by_scenario(doc)
              if (curves := _ecdf_curves(runs, frames, column))]
    if not panels:
        return Plot(key, title, caption, missing="no job started in any run.")
    colours = run_colours(doc)
    rows, cols = _grid(len(panels))
    fig, axes = _figure(rows, cols, sharey=True)
    floor = 1.0
    top = max(float(x.max()) for _, curves in panels for _, x, _ in curves)
    for ax, (scenario, curves) in zip(axes, panels, strict=False):
        for run, x, share in curves:
            ax.plot(np.maximum(x, floor), share, drawstyle="steps-post", lw=1.6,
                    color=colours[run["id"]], label=_run_label(run))
        ax.set_xscale("log")
        ax.set_xlim(floor, max(top, floor * 10) * 1.2)
        ax.set_ylim(0, 1.01)
        ax.set_title(_scenario_label(doc, scenario))
        ax.set_xlabel(xlabel)
        ax.yaxis.set_major_formatter(_percent_formatter())
        if column == "wait":
            _log_duration_axis(ax.xaxis, floor, max(top, 10.0) * 1.2)
        else:
            _plain_log_axis(ax.xaxis)
    axes[0].set_ylabel("share of jobs")
    for ax in axes[len(panels):]:
        ax.set_visible(False)
    _legend(fig, axes)
    return Plot(key, title, caption, svg=_svg(fig, key))


def _ecdf_curves(runs: list[dict[str, Any]], frames: dict[str, pl.LazyFrame], column: str
                 ) -> list[tuple[dict[str, Any], npt.NDArray[np.float64], npt.NDArray[np.float64]]]:
    """(run, x, share) tracing each run's ECDF of ``column``; runs with no started job left out."""
    import polars as pl

    curves = []
    share = np.linspace(0.0, 1.0, ECDF_POINTS)
    for run in runs:
        frame = frames.get(run["id"])
        if frame is None:
            continue
        # sorted by polars on both cores first: np.quantile is then three times faster
        values = frame.select(pl.col(column).drop_nulls().sort()).collect()[column] \
            .to_numpy().astype(np.float64)
        if values.size:
            curves.append((run, np.quantile(values, share, method="inverted_cdf"), share))
    return curves


def _percent_formatter() -> Any:
    """Tick labels for a 0..1 share as percentages."""
    from matplotlib.ticker import PercentFormatter

    return PercentFormatter(1.0, decimals=0)


# --- per class ---------------------------------------------------------------------------------

_CLASS = {
    "size_class": ("Mean wait and slowdown by job size",
                   "Jobs grouped by the cores they asked for; one bar per policy. Lower is "
                   "better. The number under each class is its job count."),
    "runtime_class": ("Mean wait and slowdown by job run time",
                      "Jobs grouped by how long they ran; one bar per policy. Lower is better. "
                      "The number under each class is its job count."),
}


def _class_plot(doc: dict[str, Any], primary: list[dict[str, Any]], kind: str) -> Plot:
    """Grouped bars of mean wait and mean bsld per class, baseline then each candidate."""
    title, caption = _CLASS[kind]
    if not primary:
        return Plot(kind, title, caption, missing="no candidate was compared with the baseline.")
    classes = primary[0]["groups"][kind]
    if not classes:
        return Plot(kind, title, caption, missing="the report holds no job classes.")
    runs = {r["id"]: r for r in doc["runs"]}
    colours = run_colours(doc)
    series = [(runs[primary[0]["baseline_run"]], "baseline")]
    series += [(runs[c["candidate_run"]], "candidate") for c in primary]
    fig, axes = _figure(2, 1, height=2.4, sharex=True)
    for ax, metric in zip(axes, ("mean_wait_s", "mean_bsld"), strict=True):
        heights = [_class_values(primary, kind, classes, run, role, metric)
                   for run, role in series]
        _grouped_bars(ax, heights, [colours[run["id"]] for run, _ in series],
                      [_run_label(run) for run, _ in series])
        ax.grid(axis="x", visible=False)
        _class_axis(ax, metric, np.concatenate(heights))
    axes[-1].set_xticks(np.arange(len(classes)),
                        [f"{_label(g['name'], 20)}\n{g['jobs']:,} jobs" for g in classes])
    _legend(fig, axes)
    return Plot(kind, title, caption, svg=_svg(fig, kind))


def _class_axis(ax: Axes, metric: str, values: npt.NDArray[np.float64]) -> None:
    """Title and y axis of a per-class panel: linear, or log when the means span orders of
    magnitude (slowdowns then start from 1, their least possible value)."""
    top = _finite_max(values)
    positive = values[np.isfinite(values) & (values > 0)]
    log = positive.size > 0 and top / float(positive.min()) > SPREAD_FOR_LOG
    scale_note = " (log scale)" if log else ""
    bottom = max(1.0, float(positive.min()) / 3) if metric == "mean_wait_s" and log else 1.0
    if log:
        ax.set_yscale("log")
        ax.set_ylim(bottom, top * 1.6)
    if metric == "mean_wait_s":
        ax.set_title("mean wait")
        if log:
            _log_duration_axis(ax.yaxis, bottom, top * 1.6)
            ax.set_ylabel(f"mean wait{scale_note}")
        else:
            ax.set_ylabel(f"mean wait ({_duration_axis(ax.yaxis, top)})")
    else:
        ax.set_title("mean bounded slowdown")
        ax.set_ylabel(f"slowdown{scale_note}")
        if log:
            _plain_log_axis(ax.yaxis, fine=top < 1000)


def _class_values(primary: list[dict[str, Any]], kind: str, classes: list[dict[str, Any]],
                  run: dict[str, Any], role: str, metric: str) -> npt.NDArray[np.float64]:
    """One run's ``metric`` per class of ``kind``, in the order of ``classes`` (NaN if unknown)."""
    comparison = next(c for c in primary if c[f"{role}_run"] == run["id"])
    by_name = {g["name"]: g for g in comparison["groups"][kind]}
    return _values([by_name.get(g["name"], {}).get(f"{role}_{metric}") for g in classes])


def _grouped_bars(ax: Axes, heights: list[npt.NDArray[np.float64]], colours: list[str],
                  labels: list[str]) -> None:
    """Side-by-side bars: one series per entry of ``heights``, one group per position."""
    width = 0.8 / len(heights)
    x = np.arange(len(heights[0]))
    for i, (h, colour, label) in enumerate(zip(heights, colours, labels, strict=True)):
        ax.bar(x + (i - (len(heights) - 1) / 2) * width, h, width * 0.92, color=colour,
               label=label)


# --- over time ---------------------------------------------------------------------------------

_SERIES = {
    "utilization": ("Utilisation over time",
                    "Share of the cluster's cores busy, averaged over each {span}; one line per "
                    "policy, one panel per scenario."),
    "queue_length": ("Queue length over time",
                     "Mean number of jobs waiting to start over each {span}; one line per "
                     "policy, one panel per scenario."),
}


def _series_plot(doc: dict[str, Any], metric: str) -> Plot:
    """One line per run of a ``timeseries`` metric against date, one panel per scenario."""
    title, caption = _SERIES[metric]
    series = doc["timeseries"]
    panels = [(scenario, [r for r in runs if series["runs"].get(r["id"], {}).get(metric)])
              for scenario, runs in _runs_by_scenario(doc)]
    panels = [(scenario, runs) for scenario, runs in panels if runs]
    if not panels:
        return Plot(metric, title, caption.format(span="time bin"),
                    missing="the report holds no time series.")
    longest = max(len(series["runs"][r["id"]][metric]) for _, runs in panels for r in runs)
    k = max(1, math.ceil(longest / MAX_SERIES_POINTS))
    colours = run_colours(doc)
    fig, axes = _figure(len(panels), 1, height=2.6, sharex=True)
    for ax, (scenario, runs) in zip(axes, panels, strict=True):
        for run in runs:
            t, y = _coarsen(_values(series["runs"][run["id"]][metric]), k, series["bin_s"])
            x = _dates(doc["input"]["origin"], series["t0"] + t)
            ax.plot(x, y * 100 if metric == "utilization" else y, lw=1.2,
                    color=colours[run["id"]], label=_run_label(run))
        ax.set_title(_scenario_label(doc, scenario))
        if metric == "utilization":
            ax.set_ylim(0, 105)
            ax.set_ylabel("busy cores (%)")
        else:
            ax.set_ylim(bottom=0)
            ax.set_ylabel("jobs waiting")
        _date_axis(ax.xaxis)
    _legend(fig, axes)
    span = _span_text(k * series["bin_s"])
    return Plot(metric, title, caption.format(span=span), svg=_svg(fig, metric))


def _span_text(seconds: float) -> str:
    """A span of time in a caption: ``6 h``, ``3 d``."""
    scale, unit = time_unit(seconds)
    return f"{seconds / scale:.3g} {unit}"


def _coarsen(values: npt.NDArray[np.float64], k: int, bin_s: int) -> tuple[
        npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """(mid-times in s from t0, values) of runs of ``k`` bins averaged together."""
    padded = np.concatenate([values, np.full(-values.size % k, np.nan)])
    with _quiet_nan_mean():
        means = np.nanmean(padded.reshape(-1, k), axis=1)
    mids = (np.arange(means.size) * k + k / 2) * bin_s
    return mids, means


@contextlib.contextmanager
def _quiet_nan_mean() -> Iterator[None]:
    """Silence numpy's warning for a mean over only NaNs (the answer, NaN, is what we want)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        yield


# --- winners and losers ------------------------------------------------------------------------


def _winners_plot(doc: dict[str, Any], primary: list[dict[str, Any]]) -> Plot:
    """Diverging bars of the change in mean wait per user and per partition (first candidate)."""
    key = "winners"
    title = "Who gains and who loses: change in mean wait"
    caption = ("Candidate minus baseline mean wait, for the users and partitions whose wait "
               "changed most; green bars waited less under the candidate, vermillion more.")
    if not primary:
        return Plot(key, title, caption, missing="no candidate was compared with the baseline.")
    groups = primary[0]["groups"]
    kinds = [(kind, groups[kind]) for kind in ("user", "partition") if len(groups[kind]) > 1]
    if not kinds:
        return Plot(key, title, caption,
                    missing="the report holds no per-user or per-partition breakdown with two "
                            "groups or more.")
    rows = max(len(items) for _, items in kinds)
    fig, axes = _figure(1, len(kinds), height=max(2.4, 0.8 + 0.26 * rows))
    for ax, (kind, items) in zip(axes, kinds, strict=True):
        diffs = _values([g["diff_mean_wait_s"] for g in items])
        y = np.arange(len(items))
        colours = [BETTER_COLOUR if d < 0 else WORSE_COLOUR for d in np.nan_to_num(diffs)]
        ax.barh(y, diffs, color=colours, height=0.7)
        ax.set_yticks(y, [f"{_label(g['name'])} ({g['jobs']:,} job{'s' if g['jobs'] != 1 else ''})"
                          for g in items])
        ax.invert_yaxis()
        ax.axvline(0, color="#333333", lw=0.8, label=_REFERENCE)
        top = _finite_max(diffs)
        ax.set_xlim(-top * 1.1, top * 1.1)
        unit = _duration_axis(ax.xaxis, top, ticks=3)
        ax.set_xlabel(f"change in mean wait ({unit}); left = waits less")
        ax.set_title("by user" if kind == "user" else "by partition")
        ax.grid(axis="y", visible=False)
    return Plot(key, title, caption, svg=_svg(fig, key))


# --- uncertainty over windows ------------------------------------------------------------------


OUTLIER_RATIO = 50.0
"""Largest window change over the median one above which the per-window axis goes symlog."""


def _window_plot(doc: dict[str, Any], primary: list[dict[str, Any]]) -> Plot:
    """Per-window paired differences of the headline metric, with the mean and its CI band."""
    key = "per_window"
    metric = metric_info(doc, doc["config"]["metric"])
    title = f"Window by window: change in {metric['label']}"
    caption = (f"Candidate minus baseline {metric['label']} in each window of the log "
               f"(bars), the change over the whole log (line) and its "
               f"{doc['config']['confidence']:.0%} confidence interval from resampled windows "
               "(band). A band clear of zero is a difference the windows agree on. When a few "
               "windows dwarf the rest, the axis is linear near zero and logarithmic beyond.")
    comparisons = [c for c in primary if c["per_window"]]
    if not comparisons:
        return Plot(key, title, caption, missing="no comparison was made over several windows.")
    runs = {r["id"]: r for r in doc["runs"]}
    k = max(1, math.ceil(max(len(c["per_window"]) for c in comparisons) / MAX_WINDOW_BARS))
    if k > 1:
        caption += (f" With this many windows, each bar is the mean change over {k} "
                    "consecutive windows.")
    fig, axes = _figure(len(comparisons), 1, height=2.6, sharex=True)
    for ax, comparison in zip(axes, comparisons, strict=True):
        _window_panel(ax, doc, comparison, metric, k)
        ax.set_title(f"{_label(runs[comparison['candidate_run']]['spec'], 40)} vs "
                     f"{_label(runs[comparison['baseline_run']]['spec'], 40)}")
    _window_legend(fig, axes[0])
    return Plot(key, title, caption, svg=_svg(fig, key))


def _window_legend(fig: Figure, ax: Axes) -> None:
    """The legend under the panels: the two bar colours, then the mean line and CI band."""
    from matplotlib.patches import Patch

    handles, labels = ax.get_legend_handles_labels()
    bars = [Patch(color=BETTER_COLOUR), Patch(color=WORSE_COLOUR)]
    fig.legend([*bars, *handles], ["candidate better in this window",
                                   "candidate worse in this window",
                                   *labels], loc="outside lower center", ncols=4)


def _window_panel(ax: Axes, doc: dict[str, Any], comparison: dict[str, Any],
                  metric: dict[str, Any], k: int = 1) -> None:
    """One comparison's per-window bars (each the mean of ``k`` consecutive windows), mean
    line and CI band, in the metric's unit."""
    windows = comparison["per_window"]
    mkey = metric["key"]
    diffs = (_values([w["candidate"].get(mkey) for w in windows])
             - _values([w["baseline"].get(mkey) for w in windows]))
    starts = np.array([w["start"].rstrip("Z")[:19] for w in windows], dtype="datetime64[s]")
    period = doc["config"]["period_s"]
    centre = starts + np.timedelta64(period // 2, "s")
    if k > 1:
        diffs, centre = _pooled(diffs, k), _pooled_times(centre, k)
        period *= k
    better = diffs < 0 if metric["better"] == "lower" else diffs > 0
    scale = 100.0 if metric["unit"] == "share" else 1.0
    ax.bar(centre, diffs * scale, width=np.timedelta64(int(period * 0.8), "s"), zorder=2,
           color=np.where(better, BETTER_COLOUR, WORSE_COLOUR).tolist())
    ax.axhline(0, color="#333333", lw=0.8, label=_REFERENCE)
    stats = next((m for m in comparison["metrics"] if m["key"] == mkey), None)
    if stats and stats["ci_low"] is not None and stats["ci_high"] is not None:
        level = f"{doc['config']['confidence']:.0%}"
        ax.axhspan(stats["ci_low"] * scale, stats["ci_high"] * scale, color="#bbbbbb",
                   alpha=0.45, lw=0, zorder=1, label=f"{level} CI of that change")
    if stats and stats["diff"] is not None:
        ax.axhline(stats["diff"] * scale, color="#000000", lw=1.2, ls="--", zorder=3,
                   label="change over the whole log")
    ax.set_ylabel(_window_ylabel(ax, metric, _finite_max(diffs)))
    _outlier_scale(ax, diffs * scale, metric)
    _date_axis(ax.xaxis)


def _pooled(values: npt.NDArray[np.float64], k: int) -> npt.NDArray[np.float64]:
    """The mean of each run of ``k`` consecutive values (NaN ignored; the last run may be
    shorter)."""
    padded = np.concatenate([values, np.full(-values.size % k, np.nan)])
    with _quiet_nan_mean():
        return np.asarray(np.nanmean(padded.reshape(-1, k), axis=1), dtype=np.float64)


def _pooled_times(times: npt.NDArray[Any], k: int) -> npt.NDArray[Any]:
    """The middle of each run of ``k`` consecutive times."""
    first, last = times[::k], times[np.minimum(np.arange(k - 1, times.size + k - 1, k),
                                               times.size - 1)]
    return np.asarray(first + (last - first) // 2)


def _outlier_scale(ax: Axes, diffs: npt.NDArray[np.float64], metric: dict[str, Any]) -> None:
    """A symmetric log axis when a few windows are far larger than the typical one (not for
    durations, whose ticks are set in their own unit)."""
    size = np.abs(diffs[np.isfinite(diffs) & (diffs != 0)])
    if metric["unit"] == "s" or size.size < 4:
        return
    typical = float(np.median(size))
    if size.max() > OUTLIER_RATIO * typical:
        from matplotlib.ticker import FuncFormatter, NullLocator, SymmetricalLogLocator

        # a power of ten, so that the major ticks (0, ±t, ±10 t, ...) sit one decade apart
        threshold = float(10 ** np.ceil(np.log10(typical)))
        ax.set_yscale("symlog", linthresh=threshold)
        ax.yaxis.set_major_locator(SymmetricalLogLocator(base=10, linthresh=threshold))
        ax.yaxis.set_minor_locator(NullLocator())
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:,.6g}"))


def _window_ylabel(ax: Axes, metric: dict[str, Any], top: float) -> str:
    """The y label of a per-window panel, after setting its tick units."""
    if metric["unit"] == "s":
        return f"change ({_duration_axis(ax.yaxis, top)})"
    if metric["unit"] == "share":
        return "change (% points)"
    return "change"


# --- fidelity ----------------------------------------------------------------------------------


def _fidelity_plot(doc: dict[str, Any], frames: dict[str, pl.LazyFrame]) -> Plot:
    """Simulated vs logged wait per job (log-log) and logged vs simulated waits per month."""
    key = "fidelity"
    title = "Fidelity: simulated waits against the waits recorded in the log"
    caption = ("Left: each dot is a job (an evenly spaced selection when there are many), its "
               "wait in the simulated baseline against its wait in the log; dots on the "
               "diagonal are exact. Right: monthly mean wait, as logged and as simulated, and "
               "the median error.")
    fidelity = doc["fidelity"]
    if not fidelity["available"]:
        return Plot(key, title, caption, missing=fidelity["reason"] or "no reason given.")
    frame = frames.get(fidelity["run"] or "")
    pairs = _logged_pairs(frame) if frame is not None else None
    if pairs is None or not pairs[0].size:
        return Plot(key, title, caption,
                    missing="no replayed job has a start time recorded in the log.")
    fig, axes = _figure(1, 2, height=3.8)
    _fidelity_scatter(axes[0], *pairs)
    _fidelity_months(axes[1], fidelity["per_month"])
    _legend(fig, axes[1:])
    return Plot(key, title, caption, svg=_svg(fig, key))


def _logged_pairs(frame: pl.LazyFrame) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """(logged wait, simulated wait) of the jobs that have both; beyond MAX_POINTS jobs, an
    evenly spaced selection in job order."""
    import polars as pl

    both = frame.select("logged_start", "submit", "wait").filter(
        pl.col("logged_start").is_not_null() & pl.col("wait").is_not_null()).collect()
    logged = (both["logged_start"] - both["submit"]).to_numpy().astype(np.float64)
    simulated = both["wait"].to_numpy().astype(np.float64)
    if logged.size <= MAX_POINTS:
        return logged, simulated
    keep = np.linspace(0, logged.size - 1, MAX_POINTS).round().astype(np.int64)
    return logged[keep], simulated[keep]


def _fidelity_scatter(ax: Axes, logged: npt.NDArray[np.float64],
                      simulated: npt.NDArray[np.float64]) -> None:
    """Log-log scatter of simulated against logged wait, with the diagonal."""
    floor = 1.0
    top = max(float(logged.max()), float(simulated.max()), 10.0) * 1.5
    ax.plot([floor, top], [floor, top], color="#000000", lw=0.9, ls="--", label=_REFERENCE)
    # thousands of dots: an embedded image is ten times smaller than one SVG element a dot
    ax.scatter(np.maximum(logged, floor), np.maximum(simulated, floor), s=5, lw=0,
               color=BASELINE_COLOUR, alpha=0.35, rasterized=True)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(floor, top)
    ax.set_ylim(floor, top)
    ax.set_aspect("equal")
    _log_duration_axis(ax.xaxis, floor, top, coarse=True)
    _log_duration_axis(ax.yaxis, floor, top)
    ax.set_xlabel("wait in the log")
    ax.set_ylabel("wait in the simulated baseline")
    ax.set_title(f"per job ({logged.size:,} shown)")


def _fidelity_months(ax: Axes, months: list[dict[str, Any]]) -> None:
    """Bars of logged vs simulated mean wait per month, and the median absolute error; past
    :data:`MAX_MONTHS` months, per run of ``k`` months (jobs-weighted means of the monthly
    figures)."""
    k = max(1, math.ceil(len(months) / MAX_MONTHS))
    jobs = _values([m["jobs"] for m in months])
    logged, simulated, error = (
        _values([m[key] for m in months]) if k == 1 else
        _pooled(_values([m[key] for m in months]) * jobs, k) / _pooled(jobs, k)
        for key in ("logged_mean_wait_s", "simulated_mean_wait_s", "median_abs_error_s"))
    months = months[::k]
    x = np.arange(len(months))
    ax.bar(x - 0.2, logged, 0.38, color="#ffffff", edgecolor="#000000", lw=0.8, hatch="///",
           label="mean wait in the log")
    ax.bar(x + 0.2, simulated, 0.38, color=BASELINE_COLOUR, label="mean wait, simulated baseline")
    ax.plot(x, error, color=WORSE_COLOUR, marker="o", ms=3.5, lw=1.2,
            label="median |simulated \u2212 logged| wait")
    unit = _duration_axis(ax.yaxis, _finite_max(np.concatenate([logged, simulated, error])))
    # level labels, thinned by _declutter until they do not touch
    ax.set_xticks(x, [_label(m["month"], 8) for m in months])
    ax.set_ylim(bottom=0)
    ax.set_ylabel(f"wait ({unit})")
    ax.set_title("per month" if k == 1 else f"per {k} months (from the month shown)")
    ax.grid(axis="x", visible=False)
