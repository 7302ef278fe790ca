"""``simulate --allocator`` and ``evaluate --gpu-baselines`` on a GPU partition."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from cli_helpers import invoke, one_line_error

from benchmarks.builders.gpu_jobs import GPU_PARTITION, write_gpu_table
from hpcpolicy.schemas import load


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_gpu_table(tmp_path_factory.mktemp("gpu") / "gpu.parquet")


def test_simulate_compares_allocators_with_gpu_metrics(table: Path, tmp_path: Path) -> None:
    out = tmp_path / "s.json"
    result = invoke("simulate", str(table), "--cluster", str(GPU_PARTITION),
                    "--allocator", "first-available", "--allocator", "topology-aware",
                    "--spread-penalty", "0.3", "--check", "--json", str(out))
    assert result.exit_code == 0, result.output
    for word in ("GPU placement", "topology-aware", "penalty GPU-h: GPU time the spread"):
        assert word in result.output
    doc = json.loads(out.read_text())
    jsonschema.validate(doc, load("sim_summary"))
    first, topo = (run["gpu"] for run in doc["runs"])
    assert [r["config"]["allocator"] for r in doc["runs"]] == ["first-available",
                                                               "topology-aware"]
    # The closest-GPU rule spreads fewer jobs over racks and loses less time to spreading.
    assert topo["cross_rack_jobs"] < first["cross_rack_jobs"]
    assert topo["spread_penalty_gpu_hours"] < first["spread_penalty_gpu_hours"]
    assert doc["runs"][0]["summary"]["gpu_utilization"] == first["gpu_utilization"]


def test_pooled_runs_have_no_gpu_block(table: Path, tmp_path: Path) -> None:
    out = tmp_path / "s.json"
    result = invoke("simulate", str(table), "--cluster", str(GPU_PARTITION), "--json", str(out))
    assert result.exit_code == 0, result.output
    assert json.loads(out.read_text())["runs"][0]["gpu"] is None


def test_spread_penalty_needs_a_node_level_allocator(table: Path) -> None:
    line = one_line_error(invoke("simulate", str(table), "--cluster", str(GPU_PARTITION),
                                 "--spread-penalty", "0.2"))
    assert "--spread-penalty needs a node-level --allocator" in line


def test_evaluate_prints_the_nine_baselines(table: Path, tmp_path: Path) -> None:
    out = tmp_path / "e.json"
    result = invoke("evaluate", str(table), "--cluster", str(GPU_PARTITION), "--gpu-baselines",
                    "--spread-penalty", "0.2", "--windows", "2", "--window-size", "50",
                    "--json", str(out))
    assert result.exit_code == 0, result.output
    doc = json.loads(out.read_text())
    pairs = [(r["policy"], r["allocator"]) for r in doc["runs"]]
    assert sorted(pairs) == sorted((p, a) for p in ("fcfs", "lcfs", "sjf")
                                   for a in ("first-available", "best-fit", "topology-aware"))
    assert all(r["gpu"]["gpu_utilization"] is not None for r in doc["runs"])
    best = doc["best_heuristic_gpu_utilization"]["none"]
    assert best["gpu_utilization"] == max(r["summary"]["gpu_utilization"] for r in doc["runs"])
    assert "GPU util" in result.output and "vs best GPU util" in result.output


def test_pooled_and_node_level_runs_are_not_mixed(table: Path, tmp_path: Path) -> None:
    line = one_line_error(invoke(
        "whatif", str(table), "--cluster", str(GPU_PARTITION), "--baseline", "fcfs+none",
        "--candidate", "fcfs+none@topology-aware", "-o", str(tmp_path / "r")))
    assert "fcfs+none would run on the pooled first-fit allocator" in line
    line = one_line_error(invoke(
        "evaluate", str(table), "--cluster", str(GPU_PARTITION), "--allocator",
        "first-fit,best-fit", "--windows", "2", "--window-size", "50"))
    assert "(allocator first-fit) would run on the pooled first-fit allocator" in line
