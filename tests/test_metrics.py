"""Metrics on hand-made results, every expected figure computed by hand in the comments."""

from __future__ import annotations

from pathlib import Path

import jsonschema
import numpy as np
import polars as pl
import pytest

from hpcpolicy import schemas
from hpcpolicy.cluster import ClusterSpec, NodeGroup
from hpcpolicy.errors import ConfigError
from hpcpolicy.sim.metrics import (
    OUTCOME_COLUMNS,
    SUMMARY_KEYS,
    aggregate,
    breakdown,
    identity_columns,
    outcome_table,
    summarize,
    write_outcomes,
)
from hpcpolicy.sim.types import SimResult
from hpcpolicy.workload import JobIds, Workload

# One node of 8 cores and 2 GPUs.
CLUSTER = ClusterSpec((NodeGroup("n", 1, 8, gpus=2, gpu_type="a100"),))


def i64(*values: int) -> np.ndarray:
    return np.array(values, dtype=np.int64)


def workload() -> Workload:
    return Workload(
        job_id=np.array(["a", "b", "c", "d"], dtype=object),
        submit=i64(0, 10, 20, 30),
        run_time=i64(120, 5, 0, 50),
        req_walltime=i64(200, 5, 60, 50),
        procs=i64(2, 4, 1, 16),
        nodes=i64(0, 0, 0, 0),
        gpus=i64(0, 1, 0, 0),
        mem_mib=i64(0, 0, 0, 0),
        user=np.array([0, 1, 0, 1], dtype=np.int32),
        partition=np.array([0, 0, 1, 0], dtype=np.int32),
        logged_start=i64(3, -1, 25, -1),
        users=("u1", "u2"),
        partitions=("p1", "p2"),
    )


def result() -> SimResult:
    # a runs [0, 120); b [100, 105); c [105, 105); d (16 procs) never fits
    return SimResult(
        start=i64(0, 100, 105, -1),
        end=i64(120, 105, 105, -1),
        never_fits=np.array([False, False, False, True]),
        killed=np.zeros(4, dtype=bool),
    )


def test_outcome_table_per_job() -> None:
    out = outcome_table(workload(), result())
    assert out.columns == list(OUTCOME_COLUMNS)
    assert out["wait"].to_list() == [0, 90, 85, None]
    assert out["run"].to_list() == [120, 5, 0, None]
    assert out["response"].to_list() == [120, 95, 85, None]
    # bsld = max((wait + run) / max(run, 10), 1): 120/120 -> 1; 95/10; 85/10; none
    assert out["bsld"].to_list() == [1.0, 9.5, 8.5, None]
    # slowdown = response / run, undefined for the zero-second job c
    assert out["slowdown"].to_list() == [1.0, 19.0, None, None]
    assert out["user"].to_list() == ["u1", "u2", "u1", "u2"]
    assert out["partition"].to_list() == ["p1", "p1", "p2", "p1"]
    assert out["logged_start"].to_list() == [3, None, 25, None]
    assert out["never_fits"].to_list() == [False, False, False, True]
    assert out["start"].to_list()[3] is None and out["end"].to_list()[3] is None


def test_summary_by_hand() -> None:
    s = summarize(outcome_table(workload(), result()), CLUSTER)
    assert list(s) == list(SUMMARY_KEYS)
    assert s["jobs"] == 3
    # waits 0, 85, 90: mean 175/3; linear percentiles at rank q*(n-1)
    assert s["mean_wait_s"] == pytest.approx(175 / 3)
    assert s["p50_wait_s"] == 85.0
    assert s["p95_wait_s"] == pytest.approx(85 + 0.9 * 5)  # rank 1.9
    assert s["p99_wait_s"] == pytest.approx(85 + 0.98 * 5)  # rank 1.98
    assert s["mean_response_s"] == pytest.approx((120 + 95 + 85) / 3)
    assert s["mean_bsld"] == pytest.approx((1 + 9.5 + 8.5) / 3)
    assert s["p95_bsld"] == pytest.approx(8.5 + 0.9 * 1.0)
    # core-seconds 2*120 + 4*5 + 1*0 = 260 over 8 cores x makespan 120 (last end - first submit)
    assert s["makespan_s"] == 120.0
    assert s["utilization"] == pytest.approx(260 / (8 * 120))
    assert s["gpu_utilization"] == pytest.approx(1 * 5 / (2 * 120))
    assert s["throughput_jobs_per_h"] == pytest.approx(3 / 120 * 3600)


def test_rlscheduler_utilization_ends_at_the_last_start() -> None:
    s = summarize(outcome_table(workload(), result()), CLUSTER, utilization_end="last_start")
    assert s["utilization"] == pytest.approx(260 / (8 * 105))  # last start 105
    assert s["makespan_s"] == 120.0
    with pytest.raises(ConfigError, match="utilization_end 'end'"):
        summarize(outcome_table(workload(), result()), CLUSTER, utilization_end="end")


def test_utilization_counts_the_cores_a_job_held() -> None:
    # under exclusive nodes job b (4 procs) held the whole 8-core node and both GPUs
    r = result()
    r.alloc_cores, r.alloc_gpus = i64(2, 8, 1, 0), i64(0, 2, 0, 0)
    r.backfilled = np.array([False, False, True, False])
    out = outcome_table(workload(), r)
    assert out["alloc_cores"].to_list() == [2, 8, 1, 0]
    assert out["backfilled"].to_list() == [False, False, True, False]
    s = summarize(out, CLUSTER)
    assert s["utilization"] == pytest.approx((2 * 120 + 8 * 5) / (8 * 120))
    assert s["gpu_utilization"] == pytest.approx(2 * 5 / (2 * 120))


def test_no_gpus_and_no_started_job_give_nulls() -> None:
    out = outcome_table(workload(), result())
    assert summarize(out, ClusterSpec.homogeneous(8))["gpu_utilization"] is None
    none_started = SimResult(start=i64(-1, -1, -1, -1), end=i64(-1, -1, -1, -1),
                             never_fits=np.ones(4, bool), killed=np.zeros(4, bool))
    s = summarize(outcome_table(workload(), none_started), CLUSTER)
    assert s["jobs"] == 0
    assert all(s[k] is None for k in SUMMARY_KEYS if k != "jobs")


def test_breakdowns() -> None:
    out = outcome_table(workload(), result())
    users = breakdown(out, "user")
    assert users["user"].to_list() == ["u1", "u2"]  # u1 used more core-hours
    assert users["jobs"].to_list() == [2, 1]
    assert users["mean_wait_s"].to_list() == [42.5, 90.0]
    assert users["p95_wait_s"].to_list() == pytest.approx([0.95 * 85, 90.0])
    assert users["mean_bsld"].to_list() == [4.75, 9.5]
    assert users["core_hours"].to_list() == pytest.approx([240 / 3600, 20 / 3600])
    parts = breakdown(out, "partition")
    assert parts["partition"].to_list() == ["p1", "p2"]
    assert parts["jobs"].to_list() == [2, 1]
    with pytest.raises(ConfigError):
        breakdown(out, "account")


def test_aggregate_is_the_mean_over_windows() -> None:
    a = summarize(outcome_table(workload(), result()), CLUSTER)
    b = dict(a, jobs=5, mean_bsld=1.0, gpu_utilization=None)
    s = aggregate([a, b])
    assert s["jobs"] == 8
    assert s["mean_bsld"] == pytest.approx((19 / 3 + 1.0) / 2)
    assert s["gpu_utilization"] == pytest.approx(a["gpu_utilization"])
    with pytest.raises(ConfigError):
        aggregate([])


def test_summary_validates_against_its_schema() -> None:
    schema = schemas.load("sim_summary")
    jsonschema.Draft202012Validator.check_schema(schema)
    summary_schema = {**schema["$defs"]["summary"], "$defs": schema["$defs"]}
    assert list(summary_schema["properties"]) == list(SUMMARY_KEYS)
    assert summary_schema["required"] == list(SUMMARY_KEYS)
    validator = jsonschema.Draft202012Validator(summary_schema)
    validator.validate(summarize(outcome_table(workload(), result()), CLUSTER))
    assert list(validator.iter_errors({**dict.fromkeys(SUMMARY_KEYS, 1.0), "extra": 1}))


def test_write_outcomes_round_trip(tmp_path: Path) -> None:
    out = outcome_table(workload(), result())
    path = tmp_path / "o.parquet"
    write_outcomes(out, path, {"hpcpolicy.origin": "0"})
    assert pl.read_parquet(path).equals(out)
    assert pl.read_parquet_metadata(path)["hpcpolicy.origin"] == "0"


def test_numeric_table_gives_the_same_summary() -> None:
    lean = outcome_table(workload(), result(), identity=False)
    assert {"job_id", "user", "partition"}.isdisjoint(lean.columns)
    full = outcome_table(workload(), result())
    assert summarize(lean, CLUSTER) == summarize(full, CLUSTER)


def test_identity_columns_keep_a_tables_ids_as_text() -> None:
    """Ids read from a table stay its Arrow column: no Python string is made for them."""
    from dataclasses import replace

    w = workload()
    ids = JobIds(pl.Series(list(map(str, w.job_id))))
    lean = replace(w, job_id=ids)
    assert [c.to_list() for c in identity_columns(lean)] == \
        [c.to_list() for c in identity_columns(w)]
    assert ids._array is None
