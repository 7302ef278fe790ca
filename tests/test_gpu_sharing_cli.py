"""The GPU-sharing allocators (FGD, best fit, ..., a learned one's folder) in simulate,
evaluate and whatif, on a tiny Alibaba-like trace."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import invoke
from gpu_sharing_jobs import write_sharing_trace

from hpcpolicy.gpu.learned_allocator import FGD_WEIGHTS

TIMES = ("--walltime-fallback", "runtime")


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_sharing_trace(tmp_path_factory.mktemp("sharing"))


@pytest.fixture(scope="module")
def learned(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An exported learned allocator with FGD's weights: it must place exactly as FGD."""
    pytest.importorskip("onnx")
    from hpcpolicy.gpu.allocator_artifact import export_allocator

    folder = tmp_path_factory.mktemp("alloc") / "allocator"
    export_allocator(FGD_WEIGHTS, folder, {"note": "FGD's weights"})
    return folder


def _cluster(table: Path) -> tuple[str, str]:
    return "--cluster", str(table.with_suffix(".cluster.toml"))


def _runs(path: Path) -> list[dict[str, Any]]:
    runs: list[dict[str, Any]] = json.loads(path.read_text())["runs"]
    return runs


def test_simulate_runs_sharing_allocators(table: Path, tmp_path: Path) -> None:
    out = tmp_path / "s.json"
    result = invoke("simulate", str(table), *_cluster(table), *TIMES, "-b", "easy",
                    "--allocator", "FGD", "--allocator", "bestfit", "--check", "--json",
                    str(out))
    assert result.exit_code == 0, result.output
    fgd, bestfit = _runs(out)
    assert [r["config"]["allocator"] for r in (fgd, bestfit)] == ["fgd", "bestfit"]
    assert fgd["summary"]["mean_wait_s"] > 0  # the pods queue: placement matters
    for run in (fgd, bestfit):
        assert 0 < run["gpu"]["gpu_utilization"] <= 1
        assert run["gpu"]["spread_jobs"] == 0  # one node per pod


def test_a_learned_folder_with_fgd_weights_replays_as_fgd(table: Path, learned: Path) -> None:
    from hpcpolicy.cluster_io import load_cluster
    from hpcpolicy.sim import SimConfig, simulate
    from hpcpolicy.workload import Workload, WorkloadOptions

    workload = Workload.from_table(table, options=WorkloadOptions(walltime_fallback="runtime"))
    cluster = load_cluster(table.with_suffix(".cluster.toml"))
    fgd = simulate(workload, cluster, SimConfig(backfill="easy", allocator="fgd"))
    mine = simulate(workload, cluster, SimConfig(backfill="easy", allocator=str(learned)))
    assert (fgd.start > 0).sum() > 100
    assert fgd.start.tolist() == mine.start.tolist()


def test_evaluate_compares_sharing_allocators(table: Path, tmp_path: Path) -> None:
    out = tmp_path / "e.json"
    result = invoke("evaluate", str(table), *_cluster(table), *TIMES, "-p", "fcfs",
                    "--allocator", "fgd", "--allocator", "packing", "--windows", "2",
                    "--window-size", "20", "--json", str(out))
    assert result.exit_code == 0, result.output
    assert {r["allocator"] for r in _runs(out)} == {"fgd", "packing"}


@pytest.mark.slow  # 25 s at load average 10: the report draws its plots
def test_whatif_compares_fgd_with_best_fit(table: Path, tmp_path: Path) -> None:
    out = tmp_path / "w"
    result = invoke("whatif", str(table), *_cluster(table), *TIMES, "--baseline",
                    "fcfs+easy@bestfit", "--candidate", "fcfs+easy@fgd", "--period", "1h",
                    "--bootstrap", "200", "-o", str(out))
    assert result.exit_code == 0, result.output
    text = (out / "report.json").read_text()
    assert "@fgd" in text and "@bestfit" in text



def test_a_whatif_spec_names_a_learned_folder_as_written(learned: Path) -> None:
    from hpcpolicy.whatif.spec import parse_run_spec

    folder = learned.parent / "Mixed-Case"
    folder.mkdir(exist_ok=True)
    for f in learned.iterdir():
        (folder / f.name).write_bytes(f.read_bytes())
    assert parse_run_spec(f"fcfs+easy@{folder}").allocator == str(folder)
    assert parse_run_spec("fcfs+easy@FGD").allocator == "fgd"


def test_evaluate_takes_a_learned_folder(learned: Path) -> None:
    from hpcpolicy.evaluate import EvaluateConfig

    cfg = EvaluateConfig(policies=("fcfs",), allocators=("fgd", str(learned)))
    assert cfg.allocators == ("fgd", str(learned))


def test_simulate_takes_a_learned_folder(table: Path, learned: Path, tmp_path: Path) -> None:
    out = tmp_path / "s.json"
    result = invoke("simulate", str(table), *_cluster(table), *TIMES, "--allocator", "fgd",
                    "--allocator", str(learned), "--json", str(out))
    assert result.exit_code == 0, result.output
    fgd, mine = _runs(out)
    assert mine["config"]["allocator"] == str(learned)
    assert mine["summary"] == fgd["summary"] and mine["gpu"] == fgd["gpu"]
