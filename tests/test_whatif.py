"""The what-if core: specs, scenarios, exact time integrals, paired bootstrap, fidelity, runner."""

from __future__ import annotations

from typing import Any

import jsonschema
import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from whatif_jobs import WEEK, synthetic

from hpcpolicy import schemas
from hpcpolicy.cluster import ClusterSpec, NodeGroup
from hpcpolicy.errors import ConfigError
from hpcpolicy.sim.metrics import outcome_table, summarize
from hpcpolicy.sim.types import SimConfig
from hpcpolicy.site.measure import fidelity, trust
from hpcpolicy.whatif import breakdowns, compare
from hpcpolicy.whatif.runner import WhatifConfig, run_whatif
from hpcpolicy.whatif.scenarios import AS_LOGGED, apply_scenario, parse_scenario
from hpcpolicy.whatif.spec import parse_run_spec
from hpcpolicy.whatif.timeseries import bin_width, cumulative_area
from hpcpolicy.workload import Workload

# --- specs and scenarios ---

def test_spec_normal_form_and_default_backfill() -> None:
    assert parse_run_spec(" SJF + Easy ").text == "sjf+easy"
    assert parse_run_spec("f1").text == "f1+easy"
    learned = parse_run_spec("runs/My+Run/policy+none")
    assert (learned.policy, learned.backfill) == ("runs/My+Run/policy", "none")


@pytest.mark.parametrize("text, words", [("sjf+eazy", "eazy"), ("+easy", "names no policy")])
def test_spec_errors_name_the_fix(text: str, words: str) -> None:
    with pytest.raises(ConfigError, match=words):
        parse_run_spec(text)


def test_scenario_normal_form_orders_changes() -> None:
    s = parse_scenario("load=1.2, nodes=+10%")
    assert s.id == "nodes=+10%,load=1.2" and s.changes == {"nodes": "+10%", "load": "1.2"}


@pytest.mark.parametrize("text, words", [
    ("cores=+10%", "unknown key 'cores'"), ("nodes=10%", "with its sign"),
    ("nodes=-100%", "leaves no machine"), ("nodes=lots", "not a change"),
    ("load=0", "positive factor"), ("load=1,load=2", "twice"), ("estimates=guess", "actual"),
    ("range=2002-05-01..2002-01-01", "ends before"), ("range=2002-01-01", "START..END"),
    ("range=yesterday..", "not a date"), ("nodes", "key=value"),
])
def test_scenario_errors(text: str, words: str) -> None:
    with pytest.raises(ConfigError, match=words):
        parse_scenario(text)


def test_scenarios_change_the_world_not_the_jobs() -> None:
    w = synthetic(200)
    two = ClusterSpec((NodeGroup("a", 10, 4), NodeGroup("b", 5, 8)))
    _, c = apply_scenario(parse_scenario("nodes=+10%"), w, two)
    assert [g.count for g in c.groups] == [11, 6]  # 5.5 rounds to even: 6
    _, c = apply_scenario(parse_scenario("nodes=+8"), w, ClusterSpec.homogeneous(64))
    assert c.total_nodes == 72
    with pytest.raises(ConfigError, match="ambiguous"):
        apply_scenario(parse_scenario("nodes=20"), w, two)
    w2, _ = apply_scenario(parse_scenario("load=2"), w, two)
    gaps, gaps2 = np.diff(w.submit - w.submit[0]), np.diff(w2.submit - w2.submit[0])
    assert np.all(np.abs(gaps2 - gaps / 2) <= 1) and (w2.logged_start == -1).all()
    assert np.array_equal(w2.run_time, w.run_time)
    w3, _ = apply_scenario(parse_scenario("estimates=actual"), w, two)
    assert np.array_equal(w3.req_walltime, w.run_time)
    w4, _ = apply_scenario(parse_scenario("range=2001-09-16..2001-09-23"), w, two)
    epoch = w4.submit + w.origin
    assert 0 < len(w4) < len(w) and epoch.min() >= 1000598400 and epoch.max() < 1001203200
    with pytest.raises(ConfigError, match="no job"):
        apply_scenario(parse_scenario("range=1990-01-01..1990-02-01"), w, two)


# --- exact integrals ---

@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 50), st.integers(0, 30), st.integers(1, 5)),
                min_size=1, max_size=20), st.lists(st.integers(-5, 90), min_size=1, max_size=8))
def test_cumulative_area_matches_unit_steps(boxes: list[tuple[int, int, int]],
                                            at: list[int]) -> None:
    begin = np.array([b for b, _, _ in boxes])
    end = begin + np.array([d for _, d, _ in boxes])
    weight = np.array([w for _, _, w in boxes])
    got = cumulative_area(begin, end, weight, at)
    want = [sum(w * max(0, min(t, e) - b) for b, e, w in zip(begin, end, weight, strict=True))
            for t in at]
    assert got.tolist() == [float(x) for x in want]


def test_bin_width_is_round_and_bounded() -> None:
    assert bin_width(3600, 400) == 60
    assert bin_width(400 * 86400, 400) == 86400
    assert bin_width(10_000 * 86400, 400) % 604800 == 0


# --- paired bootstrap ---

def _runs(w: Workload, cluster: ClusterSpec, *configs: SimConfig) -> list[Any]:
    from hpcpolicy.sim import simulate

    return [outcome_table(w, simulate(w, cluster, c)) for c in configs]


def _stats(outcomes: list[pl.DataFrame], cores: int) -> tuple[list[Any], dict[str, float]]:
    top = {c: max(float(o[c].drop_nulls().to_numpy().max()) for o in outcomes)
           for c in ("wait", "bsld")}
    t0 = min(int(o["submit"].to_numpy().min()) for o in outcomes)
    t1 = max(int(o["end"].drop_nulls().to_numpy().max()) for o in outcomes)
    n = (t1 - t0) // WEEK + 1
    return [compare.window_stats(o, cores, t0, WEEK, n, top) for o in outcomes], top


def _compare(outs: list[pl.DataFrame], cluster: ClusterSpec, seed: int = 0) -> dict[str, Any]:
    stats, top = _stats(outs, cluster.total_cores)
    rows = compare.compare_runs(stats[0], stats[1], summarize(outs[0], cluster),
                                summarize(outs[1], cluster), compare.METRICS, bootstrap=500,
                                confidence=0.95, seed=seed, hist_top=top)
    return {r["key"]: r for r in rows}


def test_run_windows_on_a_longer_grid_cut_to_a_pair_give_the_same_bits() -> None:
    """What the what-if does with a baseline: one set of per-window figures, binned for each
    comparison on its own grid, must equal window_stats made for that comparison alone."""
    w, cluster = synthetic(), ClusterSpec.homogeneous(64)
    outs = _runs(w, cluster, SimConfig("fcfs"), SimConfig("sjf", "easy"))
    stats, top = _stats(outs, cluster.total_cores)
    t0 = min(int(o["submit"].to_numpy().min()) for o in outs)
    n = len(stats[0].jobs)
    run = compare.run_windows(outs[0], cluster.total_cores, t0, WEEK, n + 7)
    cut = compare.with_histograms(run, top, n)
    whole = compare.window_stats(outs[0], cluster.total_cores, t0, WEEK, n, top)
    assert cut.jobs.tobytes() == whole.jobs.tobytes()
    for field in ("sums", "hists", "values"):
        got, want = getattr(cut, field), getattr(whole, field)
        assert got.keys() == want.keys()
        assert all(got[k].tobytes() == want[k].tobytes() for k in want), field
    assert cut.busy.tobytes() == whole.busy.tobytes()
    assert cut.capacity.tobytes() == whole.capacity.tobytes()


def test_identical_runs_differ_by_nothing() -> None:
    w, cluster = synthetic(), ClusterSpec.homogeneous(64)
    (out,) = _runs(w, cluster, SimConfig(backfill="easy"))
    rows = _compare([out, out], cluster)
    for r in rows.values():
        assert r["diff"] == 0 and r["ci_low"] == 0 and r["ci_high"] == 0
        assert r["verdict"] == "no difference" and r["windows_better"] == 0


def test_sjf_beats_fcfs_and_interval_brackets_the_whole_difference() -> None:
    w, cluster = synthetic(), ClusterSpec.homogeneous(64)
    outs = _runs(w, cluster, SimConfig("fcfs"), SimConfig("sjf", "easy"))
    rows = _compare(outs, cluster)
    bsld = rows["mean_bsld"]
    assert bsld["diff"] < 0 and bsld["verdict"] == "better"
    for key in ("mean_bsld", "mean_wait_s", "mean_response_s"):
        r = rows[key]
        assert r["ci_low"] <= r["diff"] <= r["ci_high"], r
    assert rows == _compare(outs, cluster)  # same seed, same intervals
    assert rows["mean_bsld"]["ci_low"] != _compare(outs, cluster, seed=1)["mean_bsld"]["ci_low"]


def test_histogram_quantile_is_close_to_exact() -> None:
    rng = np.random.default_rng(0)
    x = rng.lognormal(7, 2, 5000)
    edges = compare._edges(float(x.max()))
    b = np.clip(np.searchsorted(edges, x, side="right") - 1, 0, compare.HIST_BINS - 1)
    hist = np.bincount(b, minlength=compare.HIST_BINS)[None, :].astype(float)
    got = compare._hist_quantile(hist, edges, 0.95)[0]
    assert abs(got / np.quantile(x, 0.95) - 1) < 0.02


def test_too_few_windows_give_no_interval() -> None:
    w, cluster = synthetic(300, weeks=2), ClusterSpec.homogeneous(64)
    outs = _runs(w, cluster, SimConfig("fcfs"), SimConfig("sjf", "easy"))
    rows = _compare(outs, cluster)
    assert all(r["ci_low"] is None and r["verdict"] == "no clear difference"
               for r in rows.values())


def test_bootstrap_and_confidence_are_checked() -> None:
    w, cluster = synthetic(300), ClusterSpec.homogeneous(64)
    (out,) = _runs(w, cluster, SimConfig())
    stats, top = _stats([out, out], 64)
    s = summarize(out, cluster)
    with pytest.raises(ConfigError, match="bootstrap"):
        compare.compare_runs(stats[0], stats[1], s, s, compare.METRICS, bootstrap=10,
                             confidence=0.95, seed=0, hist_top=top)
    with pytest.raises(ConfigError, match="confidence"):
        compare.compare_runs(stats[0], stats[1], s, s, compare.METRICS, bootstrap=200,
                             confidence=1.0, seed=0, hist_top=top)


# --- breakdowns ---

def test_group_changes_and_notable_losers() -> None:
    base = pl.DataFrame({"user": ["a"] * 30 + ["b"] * 30, "partition": ["p"] * 60,
                         "procs": [1] * 30 + [300] * 30, "run": [100] * 30 + [90000] * 30,
                         "wait": [1000] * 60, "bsld": [2.0] * 60})
    cand = base.with_columns(pl.Series("wait", [100] * 30 + [5000] * 30),
                             pl.Series("bsld", [1.0] * 30 + [3.0] * 30))
    groups = breakdowns.group_changes(base, cand)
    users = {g["name"]: g for g in groups["user"]}
    assert users["b"]["diff_mean_wait_s"] == 4000 and users["a"]["diff_mean_wait_s"] == -900
    assert [g["name"] for g in groups["user"]] == ["b", "a"]  # losers first
    assert [g["name"] for g in groups["size_class"]] == ["1 core", "257+ cores"]
    assert [g["name"] for g in groups["runtime_class"]] == ["< 10 min", "> 1 day"]
    assert [g["name"] for g in breakdowns.notable_losers(groups["user"])] == ["b"]
    small = [dict(users["b"], jobs=breakdowns.MIN_GROUP_JOBS - 1)]
    assert breakdowns.notable_losers(small) == []


# --- fidelity ---

def _fid_frame(logged_wait: list[int], sim_wait: list[int]) -> pl.DataFrame:
    n = len(logged_wait)
    submit = np.arange(n) * 86400 * 3
    return pl.DataFrame({"submit": submit, "start": submit + np.array(sim_wait),
                         "wait": sim_wait, "logged_start": submit + np.array(logged_wait)})


def test_fidelity_of_a_perfect_replay() -> None:
    waits = list(range(0, 6000, 60))
    f = fidelity(_fid_frame(waits, waits), 0, "r")
    assert f["available"] and f["mean_abs_error_s"] == 0 and f["ks"] == 0
    assert f["spearman"] == pytest.approx(1) and f["trust"] == "good"
    assert [m["month"] for m in f["per_month"]][:2] == ["1970-01", "1970-02"]


def test_fidelity_figures_by_hand() -> None:
    logged, sim = [0, 100, 200, 300] * 20, [100, 100, 400, 300] * 20
    f = fidelity(_fid_frame(logged, sim), 0, "r")
    assert f["mean_abs_error_s"] == 75 and f["median_abs_error_s"] == 50
    assert f["wasserstein_s"] == 75  # sorted: 0/100, 100/100, 200/300, 300/400 in blocks
    assert f["ks"] == pytest.approx(0.25)  # e.g. at 200: logged 3/4 at or below, sim 2/4


def test_fidelity_unavailable_without_logged_starts() -> None:
    frame = _fid_frame([0] * 60, [5] * 60).with_columns(
        pl.lit(None, dtype=pl.Int64).alias("logged_start"))
    f = fidelity(frame, 0, "r")
    assert not f["available"] and "has a start or wait time" in f["reason"] and f["trust"] is None


def test_trust_levels() -> None:
    assert trust(0.7, 100, 120) == "good"
    assert trust(0.7, 100, 140) == "fair"
    assert trust(0.2, 100, 100) == "poor"
    assert trust(None, 0, 0) == "poor"


# --- the runner ---

def test_whatif_agrees_with_simulate_and_is_deterministic() -> None:
    from hpcpolicy.sim.windows import replay

    w, cluster = synthetic(), ClusterSpec.homogeneous(64)
    cfg = WhatifConfig(candidates=("sjf+easy", "f1+none"), scenarios=("nodes=+25%",),
                       bootstrap=300)
    result = run_whatif(w, cluster, cfg, source="x/jobs.parquet")
    doc = result.doc
    jsonschema.validate(doc, schemas.load("whatif"))
    runs = {r["id"]: r for r in doc["runs"]}
    assert list(runs) == ["as-logged/fcfs+easy", "as-logged/sjf+easy", "as-logged/f1+none",
                          "nodes=+25%/fcfs+easy", "nodes=+25%/sjf+easy", "nodes=+25%/f1+none"]
    direct = replay(w, cluster, [SimConfig("fcfs", "easy"), SimConfig("sjf", "easy"),
                                 SimConfig("f1", "none")])
    def but_utilization(summary: dict[str, object]) -> dict[str, object]:
        return {k: v for k, v in summary.items() if k != "utilization"}

    for rep, key in zip(direct, list(runs)[:3], strict=True):
        assert but_utilization(runs[key]["summary"]) == but_utilization(rep.summary)
    bigger = replay(w, ClusterSpec.homogeneous(80), [SimConfig("sjf", "easy")])[0]
    assert but_utilization(runs["nodes=+25%/sjf+easy"]["summary"]) == but_utilization(
        bigger.summary)
    # one utilisation in the report: the runs table shows what the comparisons compare
    for c in doc["comparisons"]:
        row = next(m for m in c["metrics"] if m["key"] == "utilization")
        assert runs[c["baseline_run"]]["summary"]["utilization"] == row["baseline"]
        assert runs[c["candidate_run"]]["summary"]["utilization"] == row["candidate"]
    assert doc["scenarios"][1]["cluster"]["cores"] == 80
    assert len(doc["comparisons"]) == 4 and doc["fidelity"]["available"]
    assert result.outcomes().height == 6 * len(w)
    again = run_whatif(w, cluster, cfg, source="x/jobs.parquet").doc
    assert again == doc


def test_whatif_config_errors() -> None:
    with pytest.raises(ConfigError, match="baseline itself"):
        WhatifConfig(candidates=("fcfs+easy",)).run_specs()
    with pytest.raises(ConfigError, match="twice"):
        WhatifConfig(scenarios=("nodes=+1", "nodes=+1")).scenario_list()
    with pytest.raises(ConfigError, match="unknown metric"):
        WhatifConfig(metric="happiness")
    with pytest.raises(ConfigError, match="at least one"):
        WhatifConfig(candidates=())
    assert WhatifConfig().scenario_list() == [AS_LOGGED]


def test_unknown_candidate_policy_is_a_clear_error() -> None:
    w = synthetic(100)
    with pytest.raises(ConfigError, match="neither a heuristic"):
        run_whatif(w, ClusterSpec.homogeneous(64), WhatifConfig(candidates=("magic+easy",)),
                   source="j")


def test_load_scenario_has_no_logged_starts_but_as_logged_keeps_fidelity() -> None:
    w = synthetic(600, weeks=6)
    doc = run_whatif(w, ClusterSpec.homogeneous(64),
                     WhatifConfig(scenarios=("load=1.5",), bootstrap=200), source="j").doc
    assert doc["fidelity"]["run"] == "as-logged/fcfs+easy" and doc["fidelity"]["available"]
    spans = [r["summary"]["makespan_s"] for r in doc["runs"]]
    assert spans[2] < spans[0]  # 1.5x the load in less time
