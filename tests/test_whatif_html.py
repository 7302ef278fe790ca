"""The what-if HTML report: self-contained, escaped, deterministic, and every plot drawn.

Most checks read the HTML text. One loads the page in headless Chromium (skipped with a reason
where it is not installed, failed under ``CI``, which installs it) and checks what a reader
would get: no console errors, no dialog, no network, every plot drawn, hostile names shown as
text. Set ``HPCPOLICY_REPORT_SCREENSHOT=/some/file.png`` to keep a full-page screenshot.
"""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import polars as pl
import pytest
import whatif_fixture as wf
from browser import find_chromium, open_page
from whatif_jobs import synthetic

from hpcpolicy import schemas
from hpcpolicy.cluster import ClusterSpec, NodeGroup
from hpcpolicy.sim.metrics import OUTCOME_COLUMNS
from hpcpolicy.whatif import WhatifConfig, run_whatif
from hpcpolicy.whatif.html import (
    duration,
    metric_change,
    metric_value,
    relative,
    render_html,
    write_html,
)

PLOT_KEYS = ("wait_ecdf", "bsld_ecdf", "size_class", "runtime_class", "utilization",
             "queue_length", "winners", "per_window", "fidelity")
"""Every figure of the report, all drawn for the full fixture."""

JOBS = 6000
"""Enough jobs that the fidelity scatter must be thinned (more than MAX_POINTS)."""

PROBE = """JSON.stringify((() => {
  const plots = [...document.querySelectorAll('figure.plot')].map(f => {
    const svg = f.querySelector(':scope > svg');
    if (!svg) return {id: f.id, svg: false};
    const box = svg.getBoundingClientRect();
    const marks = [...svg.querySelectorAll('[id*="-mark-"]')];
    const painted = marks.filter(m => {
      const b = m.getBoundingClientRect(); return b.width > 0 || b.height > 0; }).length;
    const broken = [...svg.querySelectorAll('use')]
      .filter(u => !document.getElementById(u.href.baseVal.slice(1))).length;
    return {id: f.id, svg: true, width: box.width, height: box.height, painted, broken};
  });
  const all = [...document.querySelectorAll('*')];
  const clashes = (svg, selector, what) => {
    const boxes = [...svg.querySelectorAll(selector)].map(e => e.getBoundingClientRect())
      .filter(b => b.width > 0 && b.height > 0);
    const found = [];
    boxes.forEach((a, i) => boxes.slice(i + 1).forEach(b => {
      if (a.left < b.right - 1 && b.left < a.right - 1 && a.top < b.bottom - 1
          && b.top < a.bottom - 1) found.push(`${svg.parentElement.id}: ${what}`);
    }));
    return found;
  };
  const overlaps = [...document.querySelectorAll('figure.plot > svg')].flatMap(svg => [
    ...clashes(svg, 'g[id*="tick_"] > g[id*="-text_"]', 'tick labels'),
    ...clashes(svg, 'g[id*="matplotlib.axis"] > g[id*="-text_"]', 'axis titles')]);
  return {
    overlaps,
    plots,
    missing: [...document.querySelectorAll('figure.plot-missing')].map(f => f.id),
    text: document.body.innerText,
    scripts: document.getElementsByTagName('script').length,
    images: document.getElementsByTagName('img').length,
    handlers: all.filter(e => [...e.attributes].some(a => /^on/i.test(a.name))).length,
  };
})())"""
"""What the page holds once loaded: per plot, its size, painted data marks and broken
references; tick labels or axis titles of a plot whose boxes overlap; the body's text; any
script, img or on* handler (there must be none)."""


@pytest.fixture(scope="module")
def report() -> tuple[dict[str, Any], pl.DataFrame]:
    """The fixture report and its outcomes."""
    return wf.build(jobs=JOBS)


@pytest.fixture(scope="module")
def page(report: tuple[dict[str, Any], pl.DataFrame]) -> str:
    """The full fixture rendered once."""
    return render_html(*report)


def _figure_ids(html: str, cls: str) -> list[str]:
    """Ids of the ``<figure class="cls">`` elements, in order."""
    return re.findall(rf'<figure class="{cls}" id="fig-([\w-]+)">', html)


# --- the page as text --------------------------------------------------------------------------


def test_page_needs_no_network(page: str) -> None:
    assert page.startswith("<!DOCTYPE html>")
    assert not re.search(r"https?:|ftp:|(href|src)=[\"']?//", page), "a URL in the page"
    assert not re.search(r"<(script|link|iframe|object|embed|img)\b", page, re.I)
    assert not re.search(r"<[^>]*\s(src|srcset)=|@import", page)
    assert set(re.findall(r'href="(\w+):', page)) == {"data"}  # the scatter's embedded PNG
    assert re.findall(r"url\(([^)]*)\)", page) and all(
        ref.startswith("#") for ref in re.findall(r"url\(([^)]*)\)", page))


def test_untrusted_names_are_escaped(page: str) -> None:
    for raw in (wf.SCRIPT_JOB, wf.IMG_USER, wf.ODD_PARTITION, "<b>not bold</b>", "<test>"):
        assert raw not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "&lt;img src=x onerror=alert(2)&gt;" in page
    assert "gpu &amp; &#34;fast&#34; &#39;queue&#39;" in page
    assert "/data/&lt;logs&gt;/jobs &amp; more.parquet" in page
    # the SVGs carry no text at all: names are glyph paths, comments are stripped
    svgs = re.findall(r"<svg\b.*?</svg>", page, re.S)
    assert len(svgs) == len(PLOT_KEYS)
    assert not any(re.search(r"<text\b|<!--|alert|onerror", svg) for svg in svgs)


def test_every_plot_is_drawn(page: str) -> None:
    assert _figure_ids(page, "plot") == list(PLOT_KEYS)
    assert _figure_ids(page, "plot-missing") == []


def test_ids_are_unique_and_references_resolve(page: str) -> None:
    ids = re.findall(r'\bid="([^"]+)"', page)
    assert len(ids) == len(set(ids)), "duplicate ids across the inline SVGs"
    refs = set(re.findall(r'href="#([^"]+)"|url\(#([^)]+)\)', page))
    missing = {a or b for a, b in refs} - set(ids)
    assert not missing


def test_figures_stay_small(page: str) -> None:
    sizes = {key: len(svg) for key, svg in zip(
        PLOT_KEYS, re.findall(r"<svg\b.*?</svg>", page, re.S), strict=True)}
    assert max(sizes.values()) < 200_000, sizes
    assert len(page) < 1_200_000


def test_rerun_in_another_process_gives_identical_bytes(
        page: str, tmp_path: Path) -> None:
    """A fresh interpreter (other hash seed) writing through write_html gives the same file."""
    target = tmp_path / "report.html"
    code = ("import sys, whatif_fixture as wf; from hpcpolicy.whatif.html import write_html; "
            f"write_html(sys.argv[1], *wf.build(jobs={JOBS}))")
    tests = str(Path(__file__).parent)
    env = {**os.environ, "PYTHONHASHSEED": "12345", "MPLCONFIGDIR": str(tmp_path / "mpl"),
           "PYTHONPATH": os.pathsep.join(filter(None, [tests, os.environ.get("PYTHONPATH")]))}
    subprocess.run([sys.executable, "-c", code, str(target)], env=env, check=True, timeout=120)
    assert target.read_bytes() == page.encode("utf-8")


def test_missing_pieces_are_explained_not_drawn(
        report: tuple[dict[str, Any], pl.DataFrame]) -> None:
    html = render_html(wf.degraded(report[0]), report[1])
    missing = ["size_class", "utilization", "queue_length", "winners", "per_window", "fidelity"]
    assert _figure_ids(html, "plot") == [k for k in PLOT_KEYS if k not in missing]
    assert _figure_ids(html, "plot-missing") == missing
    assert "Not available: the log records no start times (sacct &lt;Start&gt; &amp; co. empty)" \
        in html
    assert "Not available: the report holds no job classes." in html
    assert "Not available: the report holds no per-user breakdown." in html
    assert "Not available: the report holds no per-partition breakdown." in html


def test_a_report_without_comparisons_still_renders(
        report: tuple[dict[str, Any], pl.DataFrame]) -> None:
    doc = {**wf.degraded(report[0]), "comparisons": [],
           "headline": {"badge": "no comparison", "class": "neutral", "best": {}, "ranked": {}}}
    html = render_html(doc, report[1])
    assert _figure_ids(html, "plot") == ["wait_ecdf", "bsld_ecdf"]
    assert html.count("No candidate was compared with the baseline.") == 2
    assert 'class="verdict neutral"' in html


def test_fixture_follows_the_report_schema(report: tuple[dict[str, Any], pl.DataFrame]) -> None:
    """The fixture is only worth testing against if it is a report the core could write."""
    jsonschema.validate(report[0], schemas.load("whatif"))
    assert report[1].columns == ["run", *(c if c != "run" else "run_s" for c in OUTCOME_COLUMNS)]


def test_a_report_from_the_core_renders(tmp_path: Path) -> None:
    """End to end: run_whatif on a small log with hostile names, then the page."""
    log = synthetic(n=1200)
    ids = log.job_id.copy()
    ids[7] = wf.SCRIPT_JOB
    log = dataclasses.replace(log, job_id=ids, users=(wf.IMG_USER, wf.MATH_USER, *log.users[2:]),
                              partitions=(wf.ODD_PARTITION,))
    result = run_whatif(log, ClusterSpec((NodeGroup("n", 64, 1),)),
                        WhatifConfig(candidates=("sjf+easy",), bootstrap=200), source="<x>.parquet")
    html = write_html(tmp_path / "report.html", result.doc, result.outcomes()).read_text()
    assert _figure_ids(html, "plot") == list(PLOT_KEYS)
    assert "&lt;img src=x onerror=alert(2)&gt;" in html
    for raw in (wf.SCRIPT_JOB, wf.IMG_USER, wf.ODD_PARTITION, "<x>"):
        assert raw not in html


@pytest.mark.parametrize(("show", "value", "expected"), [
    (duration, 45, "45\u00a0s"),
    (duration, 3000, "50.0\u00a0min"),
    (duration, 5400, "1.5\u00a0h"),
    (duration, -3 * 86400, "\u22123.0\u00a0d"),
    (duration, -0.2, "0\u00a0s"),
    (duration, None, "\u2013"),
    (lambda v: metric_value(v, "share"), 0.7123, "71.2%"),
    (lambda v: metric_change(v, "share"), 0.0123, "+1.23\u00a0pp"),
    (lambda v: metric_change(v, "share"), -0.00001, "0.00\u00a0pp"),
    (lambda v: metric_change(v, "s"), 7200.0, "+2.0\u00a0h"),
    (lambda v: metric_value(v, ""), 1234.5, "1,234"),
    (relative, -0.38, "\u221238.0%"),
    (relative, 0.0222, "+2.2%"),
])
def test_values_read_naturally(show: Any, value: float | None, expected: str) -> None:
    assert show(value) == expected


# --- the page in a browser ---------------------------------------------------------------------


@pytest.fixture
def chromium() -> str:
    """The browser; skip without it, except under CI (where .ci/run installs it): fail."""
    path = find_chromium()
    if path is None:
        reason = "headless Chromium not installed: apt-get install chromium"
        if os.environ.get("CI"):
            pytest.fail(f"CI is set but {reason}")
        pytest.skip(reason)
    return path


def test_page_renders_in_headless_chromium(chromium: str, page: str, tmp_path: Path) -> None:
    target = tmp_path / "report.html"
    target.write_text(page, encoding="utf-8")
    shot = os.environ.get("HPCPOLICY_REPORT_SCREENSHOT")
    run = open_page(chromium, target, PROBE, screenshot=Path(shot) if shot else None)

    assert run.dialogs == [], "an injected script ran"
    assert run.errors == []
    assert run.requests[0] == target.resolve().as_uri()
    assert all(url.startswith("data:") for url in run.requests[1:]), "the page fetched something"
    probe = run.probe
    assert (probe["scripts"], probe["images"], probe["handlers"]) == (0, 0, 0)
    assert [p["id"] for p in probe["plots"]] == [f"fig-{k}" for k in PLOT_KEYS]
    for plot in probe["plots"]:
        assert plot["svg"] and plot["width"] > 400 and plot["height"] > 150, plot
        assert plot["painted"] > 0 and plot["broken"] == 0, plot
    assert probe["missing"] == []
    assert probe["overlaps"] == [], "tick labels or axis titles drawn over each other"
    for name in (wf.SCRIPT_JOB, wf.IMG_USER, wf.ODD_PARTITION, "<b>not bold</b>"):
        assert name in probe["text"]


@pytest.mark.parametrize("width", [1400, 800])
def test_side_by_side_panels_keep_labels_apart(chromium: str, tmp_path: Path,
                                               width: int) -> None:
    """Three scenarios put three narrow panels side by side: duration ticks (``10 s``,
    ``1 min``, ``10 min``, ``1 h``) and the long slowdown axis title must still stand apart."""
    result = run_whatif(synthetic(n=1500), ClusterSpec.homogeneous(48),
                        WhatifConfig(candidates=("sjf+easy", "f1+easy"),
                                     scenarios=("load=1.3", "nodes=+25%"), bootstrap=200),
                        source="site.parquet")
    target = write_html(tmp_path / "report.html", result.doc, result.outcomes())
    probe = open_page(chromium, target, PROBE, width=width).probe
    assert [p["id"] for p in probe["plots"]][:2] == ["fig-wait_ecdf", "fig-bsld_ecdf"]
    assert probe["overlaps"] == []


def test_utilisation_has_one_name_in_every_format(
        page: str, report: tuple[dict[str, Any], pl.DataFrame]) -> None:
    from hpcpolicy.whatif.compare import get_metric
    from hpcpolicy.whatif.markdown import render_markdown

    name = get_metric("utilization").label
    markdown = render_markdown(report[0])
    for text in (page, markdown):
        assert name in text and "to last end" not in text
