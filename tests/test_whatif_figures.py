"""What-if headline figures and their intervals measure the same thing (issue 29 item 5).

On a machine pushed past capacity, a policy that leaves one big job to the end stretches its
makespan; ``simulate``'s utilisation (work over the makespan) then drops while the work done
is the same. The what-if compares utilisation over the submit span instead, on the same grid
as its windows, so the whole-run figure is the centre of its bootstrap; percentiles are read
exactly and their replicates corrected to agree with the exact figure.
"""

from __future__ import annotations

from typing import Any

import polars as pl
import pytest
from whatif_jobs import synthetic

from hpcpolicy.cluster import ClusterSpec
from hpcpolicy.whatif import WhatifConfig, run_whatif
from hpcpolicy.whatif.markdown import render_markdown


@pytest.fixture(scope="module")
def overloaded() -> tuple[dict[str, Any], Any]:
    cfg = WhatifConfig(candidates=("sjf+easy", "f1+easy", "lcfs+none"),
                       scenarios=("load=1.5",), bootstrap=500, seed=0)
    result = run_whatif(synthetic(1500, weeks=10), ClusterSpec.homogeneous(32), cfg, source="x")
    return result.doc, result


def test_every_figure_lies_inside_its_interval(overloaded: tuple[dict[str, Any], Any]) -> None:
    doc, _ = overloaded
    checked = 0
    for c in doc["comparisons"]:
        for m in c["metrics"]:
            if m["rel_ci_low"] is None or m["rel_diff"] is None:
                continue
            checked += 1
            assert m["rel_ci_low"] <= m["rel_diff"] <= m["rel_ci_high"], (c["candidate_run"], m)
            assert m["ci_low"] <= m["diff"] <= m["ci_high"], (c["candidate_run"], m)
    assert checked == 6 * 6


def test_utilisation_is_work_done_while_jobs_arrive(
        overloaded: tuple[dict[str, Any], Any]) -> None:
    doc, result = overloaded
    for c in doc["comparisons"]:
        row = next(m for m in c["metrics"] if m["key"] == "utilization")
        for role in ("baseline", "candidate"):
            run = next(r for r in result.runs if r.id == c[f"{role}_run"])
            o = run.outcomes.filter(pl.col("start").is_not_null())
            first, last = int(run.outcomes["submit"].min()), int(run.outcomes["submit"].max())
            busy = ((o["end"].clip(upper_bound=last) - o["start"].clip(upper_bound=last))
                    .clip(lower_bound=0) * o["alloc_cores"]).sum()
            assert row[role] == pytest.approx(busy / (run.cores * (last - first)), rel=1e-9)


def test_a_scenario_past_full_load_is_flagged(overloaded: tuple[dict[str, Any], Any]) -> None:
    doc, _ = overloaded
    offered = {s["id"]: s["offered_load"] for s in doc["scenarios"]}
    assert offered["load=1.5"] == pytest.approx(1.5 * offered["as-logged"], rel=0.02)
    assert offered["load=1.5"] > 1
    warnings = [n for n in doc["notes"] if n.startswith("warning: ") and "load=1.5" in n]
    assert len(warnings) == 1 and "past 100 %" in warnings[0]
    md = render_markdown(doc)
    assert md.index("**Warning.** scenario load=1.5 offers") < md.index("## Runs")
