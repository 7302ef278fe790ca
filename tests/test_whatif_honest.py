"""What the report says must be right (issue 41 items 1-3): a tie is no difference, the
headline covers every comparison whatever the order of the candidates, and no relative figure
is made by dividing by (nearly) nothing."""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from hpcpolicy.whatif import compare
from hpcpolicy.whatif.verdicts import comparison_verdict

WEEK = 7 * 86400


def _outcomes(submit: np.ndarray, wait: np.ndarray, run: np.ndarray,
              cores: np.ndarray) -> pl.DataFrame:
    """An outcome table with the columns the comparison reads."""
    start = submit + wait
    bsld = np.maximum((wait + run) / np.maximum(run, 10), 1.0)
    return pl.DataFrame({"submit": submit, "start": start, "end": start + run,
                         "alloc_cores": cores, "wait": wait.astype(np.float64),
                         "bsld": bsld, "response": (wait + run).astype(np.float64)})


def _whole(table: pl.DataFrame, stats: compare.WindowStats) -> dict[str, Any]:
    """The whole-run figures the runner gives compare_runs."""
    out: dict[str, Any] = {"utilization": stats.utilization()}
    for m in compare.METRICS:
        if m.column is None:
            continue
        x = table[m.column].to_numpy()
        out[m.key] = float(x.mean() if m.quantile is None else np.quantile(x, m.quantile))
    return out


def _rows(base: pl.DataFrame, cand: pl.DataFrame, cores: int = 64,
          bootstrap: int = 200) -> dict[str, dict[str, Any]]:
    top = {c: float(max(base[c].to_numpy().max(), cand[c].to_numpy().max()))
           for c in ("wait", "bsld")}
    t0 = int(base["submit"].to_numpy().min())
    t1 = int(max(base["end"].to_numpy().max(), cand["end"].to_numpy().max()))
    n = (t1 - t0) // WEEK + 1
    until = int(base["submit"].to_numpy().max())
    stats = [compare.window_stats(t, cores, t0, WEEK, n, top, until) for t in (base, cand)]
    rows = compare.compare_runs(stats[0], stats[1], _whole(base, stats[0]),
                                _whole(cand, stats[1]), compare.METRICS, bootstrap=bootstrap,
                                confidence=0.95, seed=0, hist_top=top)
    return {r["key"]: r for r in rows}


def _table(seed: int, n: int = 400, weeks: int = 8, busy: float = 1.0) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    submit = np.sort(rng.integers(0, weeks * WEEK, n)).astype(np.int64)
    wait = (rng.exponential(3600.0 * busy, n) * (rng.random(n) < 0.5)).astype(np.int64)
    return _outcomes(submit, wait, rng.integers(1, 20_000, n).astype(np.int64),
                     rng.integers(1, 16, n).astype(np.int64))


# --- 1. ties ---

def test_a_tie_is_no_difference_not_a_loss() -> None:
    base = _table(1)
    rows = _rows(base, base.clone())
    for r in rows.values():
        assert (r["share_better"], r["share_worse"], r["share_tied"]) == (0.0, 0.0, 1.0)
        assert r["verdict"] == "no difference", r
    assert comparison_verdict(compare.METRICS, list(rows.values()), "mean_bsld") \
        == "no difference"


def test_an_identical_replay_is_called_identical() -> None:
    base = _table(1)
    rows = list(_rows(base, base.clone()).values())
    assert comparison_verdict(compare.METRICS, rows, "mean_bsld", identical=True) == "identical"


def test_ties_count_apart_from_wins_and_losses() -> None:
    """A candidate that ties in most resamples and loses in a few is not 'likely worse'."""
    base = _table(2)
    # one job of one week waits an hour longer: only the resamples that draw that week differ
    wait = base["wait"].to_numpy().copy()
    wait[0] += 3600
    cand = _outcomes(base["submit"].to_numpy(), wait.astype(np.int64),
                     (base["end"] - base["start"]).to_numpy(), base["alloc_cores"].to_numpy())
    rows = _rows(base, cand)
    r = rows["mean_wait_s"]
    # about (7/8)^8 = 34 % of the resamples leave that week out: they tie
    assert r["share_better"] == 0.0 and 0.2 < r["share_tied"] < 0.5
    assert abs(r["share_better"] + r["share_worse"] + r["share_tied"] - 1) < 1e-12
    assert comparison_verdict(compare.METRICS, list(rows.values()), "mean_wait_s") \
        == "no clear difference"


# --- 3. relative figures ---

def test_a_zero_baseline_gives_the_absolute_change_only_and_says_so() -> None:
    """The issue's case: the baseline's p95 wait is 0 s (no queue), the candidate's is not."""
    rng = np.random.default_rng(5)
    n = 400
    submit = np.sort(rng.integers(0, 8 * WEEK, n)).astype(np.int64)
    run = rng.integers(1, 20_000, n).astype(np.int64)
    cores = np.ones(n, dtype=np.int64)
    base = _outcomes(submit, np.zeros(n, dtype=np.int64), run, cores)
    wait = np.where(rng.random(n) < 0.1, rng.integers(1, 900, n), 0).astype(np.int64)
    r = _rows(base, _outcomes(submit, wait, run, cores))["p95_wait_s"]
    assert r["baseline"] == 0 and r["candidate"] > 0 and r["ci_high"] > 0
    assert r["rel_diff"] is None and r["rel_ci_low"] is None and r["rel_ci_high"] is None
    assert "absolute change only" in r["rel_note"] and "p95 wait" in r["rel_note"]


def test_a_sizeable_baseline_keeps_its_relative_figures() -> None:
    r = _rows(_table(3, busy=4.0), _table(4, busy=4.0))["mean_wait_s"]
    assert r["rel_diff"] is not None and r["rel_ci_low"] is not None and r["rel_note"] is None


@st.composite
def _pair(draw: st.DrawFn) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Two replays of the same jobs with made-up waits, many of them zero or tiny."""
    n = draw(st.integers(20, 200))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    submit = np.sort(rng.integers(0, draw(st.integers(1, 10)) * WEEK, n)).astype(np.int64)
    run = rng.integers(0, draw(st.sampled_from([5, 60, 50_000])), n).astype(np.int64)
    cores = rng.integers(1, 8, n).astype(np.int64)
    tables = []
    for _ in range(2):
        scale = draw(st.sampled_from([0.0, 1.0, 30.0, 5000.0]))
        share = draw(st.floats(0.0, 1.0))
        wait = (rng.exponential(scale, n) * (rng.random(n) < share)).astype(np.int64) \
            if scale else np.zeros(n, dtype=np.int64)
        tables.append(_outcomes(submit, wait, run, cores))
    return tables[0], tables[1]


@settings(max_examples=60, deadline=None)
@given(_pair())
def test_no_relative_figure_below_minus_100_percent(pair: tuple[pl.DataFrame, pl.DataFrame]
                                                     ) -> None:
    rows = _rows(*pair, cores=8, bootstrap=100)
    for r in rows.values():  # every compared metric is non-negative
        for key in ("rel_diff", "rel_ci_low", "rel_ci_high"):
            assert r[key] is None or r[key] >= -1.0, (r["key"], key, r[key])
        if r["rel_ci_low"] is None and r["ci_low"] is not None:
            assert r["rel_note"], r


def test_the_sentence_and_tables_say_absolute_only() -> None:
    from whatif_fixture import build

    from hpcpolicy.whatif.markdown import render_markdown
    from hpcpolicy.whatif.verdicts import metric_sentence, relative_change

    row = {"key": "p95_wait_s", "baseline": 0.0, "candidate": 300.0, "diff": 300.0,
           "rel_diff": None, "ci_low": 0.0, "ci_high": 600.0, "rel_ci_low": None,
           "rel_ci_high": None, "rel_note": "absolute change only: the baseline's p95 wait "
           "is 0 s, under 1 min, too small to divide by"}
    text = metric_sentence(compare.get_metric("p95_wait_s"), row, 0.95)
    assert text == ("p95 wait 0s -> 5.0m (+5.0m, 95% CI +0s .. +10.0m; absolute change only: "
                    "the baseline's p95 wait is 0 s, under 1 min, too small to divide by)")
    assert relative_change(row) == "-"
    doc, _ = build()
    doc["comparisons"][0]["metrics"][1].update(row)
    assert "absolute change only: the baseline's p95 wait is 0 s" in render_markdown(doc)
    from hpcpolicy.whatif.html import render_html

    _, outcomes = build()
    assert "the baseline&#39;s p95 wait is 0 s" in render_html(doc, outcomes)


# --- 2. the headline ---

def _primary(diff: float, low: float | None, high: float | None, verdict: str) -> dict[str, Any]:
    return {"key": "mean_bsld", "baseline": 10.0, "candidate": 10.0 + diff, "diff": diff,
            "rel_diff": diff / 10.0, "ci_low": low, "ci_high": high,
            "rel_ci_low": None if low is None else low / 10.0,
            "rel_ci_high": None if high is None else high / 10.0, "rel_note": None,
            "verdict": verdict}


_OUTCOMES = st.sampled_from([
    ("better", _primary(-5.0, -6.0, -4.0, "better")),
    ("likely better", _primary(-1.0, -3.0, 0.5, "no clear difference")),
    ("no clear difference", _primary(0.2, -1.0, 1.0, "no clear difference")),
    ("identical", _primary(0.0, 0.0, 0.0, "no difference")),
    ("likely worse", _primary(2.0, -0.5, 4.0, "no clear difference")),
    ("worse", _primary(6.0, 4.0, 8.0, "worse")),
    ("mixed", _primary(-2.0, -3.0, -1.0, "better")),
])


@st.composite
def _comparisons(draw: st.DrawFn) -> list[tuple[str, str, str, dict[str, Any]]]:
    """(scenario, candidate, verdict, primary row) for 1-4 candidates under 1-2 scenarios."""
    names = draw(st.lists(st.sampled_from(["sjf+easy", "f1+easy", "wfp3+none", "runs/x/policy"]),
                          min_size=1, max_size=4, unique=True))
    out = []
    for scenario in draw(st.sampled_from([["as-logged"], ["as-logged", "nodes=+10%"]])):
        for name in names:
            verdict, row = draw(_OUTCOMES)
            out.append((scenario, name, verdict, row))
    return out


@settings(max_examples=200, deadline=None)
@given(_comparisons(), st.randoms(use_true_random=False))
def test_the_headline_does_not_depend_on_the_order_of_the_candidates(
        results: list[tuple[str, str, str, dict[str, Any]]], rnd: Any) -> None:
    from hpcpolicy.whatif.verdicts import headline

    labels = {"as-logged": "as logged", "nodes=+10%": "nodes +10%"}
    first = headline("fcfs+easy", compare.METRICS[0], labels, results, confidence=0.95)
    shuffled = list(results)
    rnd.shuffle(shuffled)
    assert headline("fcfs+easy", compare.METRICS[0], labels, shuffled, confidence=0.95) == first
    # every candidate under every scenario is named, and so is each scenario
    for scenario, name, _, _ in results:
        assert labels[scenario].capitalize() in first["sentence"] and name in first["sentence"]
    assert set(first["best"]) == {r[0] for r in results}


def test_the_headline_names_the_best_candidate_of_each_scenario() -> None:
    from hpcpolicy.whatif.verdicts import headline

    results = [("as-logged", "f1+easy", "likely worse", _primary(2.0, -0.5, 4.0, "x")),
               ("as-logged", "sjf+easy", "better", _primary(-5.0, -6.0, -4.0, "better")),
               ("nodes=+10%", "f1+easy", "no clear difference", _primary(0.1, -1, 1, "x")),
               ("nodes=+10%", "sjf+easy", "worse", _primary(3.0, 2.0, 4.0, "worse"))]
    labels = {"as-logged": "as logged", "nodes=+10%": "nodes +10%"}
    h = headline("fcfs+easy", compare.METRICS[0], labels, results, confidence=0.95)
    assert h["sentence"] == (
        "Against fcfs+easy on mean bounded slowdown. As logged: best sjf+easy, better (-50%, "
        "95% CI -60% .. -40%); f1+easy likely worse (+20%). Nodes +10%: no candidate beats "
        "the baseline; f1+easy no clear difference (+1%); sjf+easy worse (+30%).")
    assert h["best"] == {"as-logged": "sjf+easy", "nodes=+10%": None}
    assert (h["badge"], h["class"]) == ("1 better, 1 no clear difference, 1 likely worse, "
                                        "1 worse", "mixed")


# --- end to end ---

def _by_candidate(doc: dict[str, Any]) -> dict[str, Any]:
    """Everything in a report that must not depend on the order of the candidates."""
    return {"verdict": doc["verdict"], "headline": doc["headline"],
            "comparisons": {c["candidate_run"]: c for c in doc["comparisons"]},
            "runs": {r["id"]: r for r in doc["runs"]}}


@settings(max_examples=3, deadline=None)
@given(st.permutations(["sjf+easy", "f1+none", "lcfs+easy"]))
def test_the_order_of_the_candidates_changes_no_verdict_badge_or_number(
        order: list[str]) -> None:
    import jsonschema
    from whatif_jobs import synthetic

    from hpcpolicy import schemas
    from hpcpolicy.cluster import ClusterSpec
    from hpcpolicy.whatif.runner import WhatifConfig, run_whatif

    w, machine = synthetic(500, weeks=6), ClusterSpec.homogeneous(64)

    def doc(candidates: list[str]) -> dict[str, Any]:
        cfg = WhatifConfig(candidates=tuple(candidates), scenarios=("nodes=+25%",),
                           bootstrap=200)
        return run_whatif(w, machine, cfg, source="j").doc

    first = doc(sorted(order))
    jsonschema.validate(first, schemas.load("whatif"))
    assert _by_candidate(doc(order)) == _by_candidate(first)


def test_a_candidate_that_replays_as_the_baseline_is_identical() -> None:
    """On a machine where no queue forms every policy starts every job on submit."""
    from whatif_jobs import synthetic

    from hpcpolicy.cluster import ClusterSpec
    from hpcpolicy.whatif.runner import WhatifConfig, run_whatif

    doc = run_whatif(synthetic(300, weeks=6), ClusterSpec.homogeneous(100_000),
                     WhatifConfig(candidates=("sjf+easy",), bootstrap=200), source="j").doc
    (c,) = doc["comparisons"]
    assert c["verdict"] == "identical" and "identical" in c["summary"]
    assert doc["headline"]["badge"] == "1 identical" and doc["headline"]["class"] == "neutral"
    assert "no candidate beats the baseline; sjf+easy identical" in doc["verdict"]


def test_the_page_badge_summarises_every_comparison_in_any_order() -> None:
    import re

    from whatif_fixture import build

    from hpcpolicy.whatif.html import render_html
    from hpcpolicy.whatif.markdown import render_markdown

    doc, outcomes = build()
    swapped = {**doc, "comparisons": [doc["comparisons"][i] for i in (1, 0, 2)]}
    pattern = re.compile(r'<section id="verdict" class="verdict (\w+)".*?<span class="badge '
                         r'(\w+)">([^<]*)</span>', re.S)
    badges = [m.groups() if (m := pattern.search(render_html(d, outcomes))) else None
              for d in (doc, swapped)]
    assert badges[0] == badges[1] == (doc["headline"]["class"], doc["headline"]["class"],
                                      doc["headline"]["badge"])
    assert f"**Verdict ({doc['headline']['badge']}).**" in render_markdown(doc)


def test_no_resample_of_a_bounded_slowdown_falls_below_one() -> None:
    """A p95 bounded slowdown of exactly 1 (no queue) keeps its ratio: the histogram's
    correction never carries a resample below the least value a slowdown can take."""
    rng = np.random.default_rng(9)
    n = 400
    submit = np.sort(rng.integers(0, 8 * WEEK, n)).astype(np.int64)
    run = rng.integers(10, 20_000, n).astype(np.int64)
    cores = np.ones(n, dtype=np.int64)
    late = rng.random(n) < 0.03  # a few short jobs wait an hour: all else starts on submit
    run = np.where(late, 10, run).astype(np.int64)
    wait = np.where(late, 3600, 0).astype(np.int64)
    base = _outcomes(submit, wait, run, cores)
    cand = _outcomes(submit, np.where(late, 1800, 0).astype(np.int64), run, cores)
    r = _rows(base, cand)["p95_bsld"]
    assert r["baseline"] == 1.0 and r["rel_note"] is None and r["rel_ci_low"] is not None
