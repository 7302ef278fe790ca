"""The Alibaba GPU cluster trace 2023 from ../shared/data: the pod list into the job table,
the node list into a cluster spec, and the table into a Workload.

Expected values come from the data's README (8,152 pods, 1,523 nodes) and from reading the
files independently with the csv module.
"""

from __future__ import annotations

import csv
from collections import Counter
from typing import Any

import polars as pl
import pytest
from conftest import shared_file

from hpcpolicy.cluster_io import load_cluster
from hpcpolicy.ingest import IngestConfig, cluster_path, detect_format, ingest, output_paths

PODS = "openb_pod_list_default.csv"
NODES = "openb_node_list_all_node.csv"


def _rows(name: str) -> list[dict[str, str]]:
    with open(shared_file(name), newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module")
def ingested(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The default pod list ingested once (its node list is found beside it)."""
    out = tmp_path_factory.mktemp("openb") / "openb.parquet"
    report = ingest([shared_file(PODS)], out, IngestConfig())
    paths = output_paths(out)
    return {"report": report, "out": out, "jobs": pl.read_parquet(paths["jobs"]),
            "rejects": pl.read_parquet(paths["rejects"])}


def test_pod_list_is_detected() -> None:
    assert detect_format(shared_file(PODS)) == "alibaba"


def test_every_pod_is_kept_with_its_phase(ingested: dict[str, Any]) -> None:
    report, jobs = ingested["report"], ingested["jobs"]
    assert (report.rows_read, report.jobs_kept, report.rows_rejected) == (8152, 8152, 0)
    assert ingested["rejects"].height == 0
    states = Counter(str(s) for s in jobs["state"])
    rows = _rows(PODS)
    phases = Counter(r["pod_phase"] for r in rows)
    assert phases == {"Pending": 897, "Running": 5193, "Failed": 1870, "Succeeded": 192}
    # Running pods deleted before the trace's last moment ran until deleted (outcome
    # unknown); those deleted at that moment were still running.
    last = max(int(r["deletion_time"]) for r in rows)
    censored = sum(1 for r in rows if r["pod_phase"] == "Running"
                   and int(r["deletion_time"]) == last)
    assert 0 < censored < 100
    assert states == {"pending": 897, "running": censored, "unknown": 5193 - censored,
                      "failed": 1870, "completed": 192}


def test_fractional_gpus_and_requests_match_the_file(ingested: dict[str, Any]) -> None:
    rows = {r["name"]: r for r in _rows(PODS)}
    jobs = ingested["jobs"]
    for job in jobs.iter_rows(named=True):
        row = rows[job["job_id"]]
        gpus, milli = int(row["num_gpu"]), int(row["gpu_milli"])
        assert job["req_gpus"] == gpus
        assert job["req_gpu_milli"] == (milli if gpus else None)
        assert job["req_cpus"] == -(-int(row["cpu_milli"]) // 1000)
        assert job["req_mem_mib"] == int(row["memory_mib"])
        assert job["qos"] == row["qos"]
    shared = jobs.filter(pl.col("req_gpu_milli") < 1000)
    assert shared.height == sum(1 for r in rows.values()
                                if int(r["num_gpu"]) > 0 and int(r["gpu_milli"]) < 1000)
    assert shared.height > 0 and set(shared["req_gpus"]) == {1}


def test_times_follow_the_phase(ingested: dict[str, Any]) -> None:
    jobs = ingested["jobs"]
    pending = jobs.filter(pl.col("state") == "pending")
    assert pending["start_time"].null_count() == pending.height == 897
    running = jobs.filter(pl.col("state") == "running")
    assert running["start_time"].null_count() == 0
    assert running["run_time_s"].null_count() == running["end_time"].null_count()
    assert running["end_time"].null_count() == running.height > 0
    ended = jobs.filter(pl.col("state").is_in(["completed", "failed", "unknown"]))
    assert ended["run_time_s"].null_count() == 0 and ended["run_time_s"].min() >= 0
    notes = " ".join(ingested["report"].notes)
    assert f"{5193 - running.height:,} Running pods deleted before the trace's last" in notes
    assert f"{running.height} Running pods deleted at the trace's last deletion time" in notes
    assert "897 Pending pods were never scheduled" in notes
    assert "2023-01-01T00:00:00+00:00" in notes


def test_node_list_beside_the_pods_gives_the_cluster_spec(ingested: dict[str, Any]) -> None:
    nodes = _rows(NODES)
    spec = load_cluster(cluster_path(ingested["out"]))
    assert ingested["report"].cluster_spec == str(cluster_path(ingested["out"]))
    assert spec.total_nodes == len(nodes) == 1523
    assert spec.total_gpus == sum(int(n["gpu"]) for n in nodes) == 6212
    assert spec.total_cores == sum(int(n["cpu_milli"]) for n in nodes) // 1000
    gpus_by_type = Counter()
    for n in nodes:
        if int(n["gpu"]):
            gpus_by_type[n["model"].lower()] += int(n["gpu"])
    from_spec = Counter()
    for g in spec.groups:
        if g.gpus:
            from_spec[g.gpu_type] += g.count * g.gpus
    assert from_spec == gpus_by_type
    assert all(g.rack is None and g.gpu_speed == 1.0 for g in spec.groups)


def test_workload_drops_pods_without_a_run_time(ingested: dict[str, Any]) -> None:
    from hpcpolicy.workload import Workload, WorkloadOptions

    w = Workload.from_table(ingested["out"], options=WorkloadOptions(walltime_fallback="runtime"))
    running = int((ingested["jobs"]["state"] == "running").sum())
    assert len(w.job_id) == 192 + 1870 + 5193 - running
    assert len(w.dropped["no_run_time"]) == 897 + running
