"""Per-month trust (issue 42 part 4): the what-if's fidelity section flags the months where
the replay's mean wait is off the log's by more than 50 %; fidelity gives every month's
error."""

from __future__ import annotations

import numpy as np
import polars as pl
from test_site import _as_logged, _workload

from hpcpolicy.cluster import ClusterSpec
from hpcpolicy.sim.types import SimConfig
from hpcpolicy.site.fidelity import fidelity_report
from hpcpolicy.site.measure import fidelity, months_off

DAY = 86400


def _outcomes(logged_wait: np.ndarray, sim_wait: np.ndarray) -> pl.DataFrame:
    """Outcome rows one every three days (about ten a month) with the given waits."""
    submit = np.arange(len(logged_wait)) * 3 * DAY
    return pl.DataFrame({"submit": submit, "start": submit + sim_wait, "wait": sim_wait,
                         "logged_start": submit + logged_wait})


def test_the_whatif_flags_only_the_months_off_by_more_than_half() -> None:
    logged = np.full(60, 600)
    sim = logged.copy()
    sim[10:20] = 1000   # February (and the first days of March): +67 %
    sim[40:50] = 800    # +33 %: not flagged
    f = fidelity(_outcomes(logged, sim), 0, "r")
    off = months_off(f["per_month"])
    assert off and all(m in ("1970-02", "1970-03") for m in off)
    assert "1970-02" in off
    assert f"In {len(off)} of {len(f['per_month'])} months (" in f["explanation"]
    assert "more than 50 %" in f["explanation"] or "more than 50%" in f["explanation"]
    same = fidelity(_outcomes(logged, logged), 0, "r")
    assert months_off(same["per_month"]) == [] and "months (" not in same["explanation"]


def test_fidelity_gives_each_months_error() -> None:
    w = _workload(600)
    logged = _as_logged(w, ClusterSpec.homogeneous(64), SimConfig(backfill="easy"))
    report = fidelity_report(logged, ClusterSpec.homogeneous(32))
    assert report["by_month"]
    assert all(m["mean_wait_rel_error"] is not None for m in report["by_month"])
