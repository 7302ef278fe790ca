"""What-if on logs of millions of jobs (issue 30 item 4): the faster paths give the same
figures as the plain ones, the runs' outcome tables live on disk and go away with the result,
and plots over thousands of windows or months pool them and say so."""

from __future__ import annotations

import gc
from typing import Any

import numpy as np
import polars as pl
import pytest
import whatif_fixture
from whatif_jobs import synthetic

from hpcpolicy.cluster import ClusterSpec
from hpcpolicy.whatif import WhatifConfig, run_whatif, write_report
from hpcpolicy.whatif import plots as plots_mod
from hpcpolicy.whatif.breakdowns import _codes
from hpcpolicy.whatif.compare import HIST_BINS, _edges, _hist_quantile, _resampled_quantile
from hpcpolicy.whatif.plots import _fidelity_months, _pooled, _pooled_times, draw_plots


@pytest.mark.parametrize("windows", [4, 37, 300])
@pytest.mark.parametrize("q", [0.0, 0.5, 0.95, 0.999, 1.0])
def test_resampled_quantile_is_the_plain_product_bit_for_bit(windows: int, q: float) -> None:
    rng = np.random.default_rng(windows)
    counts = rng.integers(0, 3, (400, windows)).astype(np.float64)
    counts[0] = 0.0  # a replicate with no job at all
    hist = np.zeros((windows, HIST_BINS))
    for w in range(windows):
        bins = np.clip(rng.lognormal(4, 2, rng.integers(0, 300)).astype(int), 0, HIST_BINS - 1)
        np.add.at(hist[w], bins, 1.0)
    hist[:, -1] += rng.integers(0, 2, windows)  # jobs in the top bin
    edges = _edges(1e6)
    expected = _hist_quantile(counts @ hist, edges, q)
    assert np.array_equal(_resampled_quantile(counts, hist, edges, q), expected)


def test_group_codes_are_numpys_unique() -> None:
    values = pl.Series(["bob", None, "ålice", "", "bob", "zed", "ålice", "Ann"])
    names, code = _codes(values)
    want_names, want_code = np.unique(values.fill_null("").to_numpy(), return_inverse=True)
    assert names.tolist() == want_names.tolist()
    assert code.tolist() == want_code.tolist()
    names, code = _codes(pl.Series([10, 2, None, 2]))  # numbers group as text, as before
    assert names.tolist() == ["", "10", "2"] and code.tolist() == [1, 2, 0, 2]


def test_outcomes_live_on_disk_and_leave_with_the_result(tmp_path: Any) -> None:
    cfg = WhatifConfig(candidates=("sjf+easy",), scenarios=("nodes=+50%",), bootstrap=200)
    result = run_whatif(synthetic(400, weeks=6), ClusterSpec.homogeneous(32), cfg, source="x")
    folder = result.runs[0].store.folder
    assert len(list(folder.iterdir())) == 4 + 2  # one file per run, job names per scenario
    whole = result.outcomes()
    assert whole.height == 4 * 400
    assert whole.columns[:2] == ["run", "job_id"] and "run_s" in whole.columns
    paths = write_report(result, tmp_path / "r", outcomes=True)
    assert pl.read_parquet(paths["outcomes"]).equals(whole)
    run = result.runs[1]
    assert run.columns("wait", "bsld").equals(run.outcomes.select("wait", "bsld"))
    del result, run
    gc.collect()
    assert not folder.exists()


def test_pooling_helpers() -> None:
    assert _pooled(np.array([1.0, 3.0, np.nan, 5.0, 7.0]), 2).tolist() == [2.0, 5.0, 7.0]
    days = np.array(["2024-01-01", "2024-01-08", "2024-01-15"], dtype="datetime64[s]")
    assert _pooled_times(days, 2).tolist() == list(
        np.array(["2024-01-04T12:00", "2024-01-15"], dtype="datetime64[s]").tolist())


@pytest.mark.slow  # over the ten-minute budget of the default suite; run with -m slow
def test_many_windows_and_months_are_pooled_and_said(monkeypatch: pytest.MonkeyPatch) -> None:
    doc, outcomes = whatif_fixture.build()
    windows = len(doc["comparisons"][0]["per_window"])
    months = len(doc["fidelity"]["per_month"])
    assert windows >= 4 and months >= 2
    monkeypatch.setattr(plots_mod, "MAX_WINDOW_BARS", 2)
    monkeypatch.setattr(plots_mod, "MAX_MONTHS", 1)
    drawn = draw_plots(doc, outcomes)
    k = -(-windows // 2)
    assert f"each bar is the mean change over {k} consecutive windows" in \
        drawn["per_window"].caption
    assert drawn["fidelity"].svg
    monkeypatch.undo()
    assert "consecutive windows" not in draw_plots(doc, outcomes)["per_window"].caption


def test_fidelity_months_pool_jobs_weighted(monkeypatch: pytest.MonkeyPatch) -> None:
    from matplotlib.figure import Figure

    months = [{"month": f"2024-0{i + 1}", "jobs": jobs, "logged_mean_wait_s": wait,
               "simulated_mean_wait_s": wait * 2, "median_abs_error_s": 1.0}
              for i, (jobs, wait) in enumerate([(1, 10.0), (3, 30.0), (2, 5.0)])]
    monkeypatch.setattr(plots_mod, "MAX_MONTHS", 2)
    ax = Figure().subplots()
    _fidelity_months(ax, months)
    assert ax.get_title() == "per 2 months (from the month shown)"
    heights = [p.get_height() for p in ax.patches]
    assert heights == [25.0, 5.0, 50.0, 10.0]  # (1 x 10 + 3 x 30) / 4, then the last month
    monkeypatch.undo()
    ax = Figure().subplots()
    _fidelity_months(ax, months)
    assert ax.get_title() == "per month" and len(ax.patches) == 6
