"""At 80 columns (issue 29 item 11): numbers are never cut, a long policy path never wraps
mid-word (the table shows ``…/parent/name`` and lists the full path under it), and ``--help``
never cuts a word."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from cli_helpers import invoke
from env_jobs import write_table

ELLIPSIS_IN_NUMBER = re.compile(r"\d[\d,.]*…")


@pytest.fixture(scope="module")
def long_policy(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    torch = pytest.importorskip("torch")
    pytest.importorskip("onnxruntime")
    from hpcpolicy.learn.export import export_policy
    from hpcpolicy.learn.networks import ActorCritic

    tmp = tmp_path_factory.mktemp("layout")
    torch.manual_seed(0)
    folder = tmp / ("experiments-" + "x" * 30) / "ppo_seed0_long_run_name" / "policy"
    policy = export_policy(ActorCritic(7, 7), folder, k=8, metrics={},
                           config={"algo": "ppo", "seed": 0, "hidden": [16],
                                   "activation": "tanh"},
                           provenance={"reward": "bsld", "training_data": None})
    return write_table(tmp / "jobs.parquet", n=300, seed=3), policy


@pytest.mark.parametrize("command", ["simulate", "evaluate"])
def test_a_long_policy_path_cuts_no_number(long_policy: tuple[Path, Path], command: str) -> None:
    table, policy = long_policy
    args = (["simulate", str(table), "-p", str(policy), "-p", "fcfs", "-b", "easy"]
            if command == "simulate" else
            ["evaluate", str(table), "--policy", f"{policy},fcfs", "--windows", "2",
             "--window-size", "60"])
    result = invoke(*args)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    legend = next(ln for ln in lines if ln.endswith(f" = {policy}"))
    label = legend.split(" = ")[0]
    assert label.endswith("/policy") and len(label) <= 16
    row = next(ln for ln in lines if ln.startswith(f" {label} "))
    assert len(row) <= 80 and re.search(r"\d\.\d\d+\s*$|%\s*$", row), row  # last column whole
    assert not any(ELLIPSIS_IN_NUMBER.search(ln) for ln in lines)
    assert all(len(ln) <= 80 for ln in lines if ln.startswith(" "))


def test_whatif_titles_a_long_policy_path_whole(long_policy: tuple[Path, Path],
                                                tmp_path: Path) -> None:
    table, policy = long_policy
    result = invoke("whatif", str(table), "-c", f"{policy}+easy", "--period", "1h",
                    "--bootstrap", "100", "-o", str(tmp_path / "rep"))
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    label = next(ln for ln in lines if ln.endswith(f" = {policy}")).split(" = ")[0]
    assert f"as-logged/{label}+easy vs as-logged/fcfs+easy" in [ln.strip() for ln in lines]
    assert not any(ELLIPSIS_IN_NUMBER.search(ln) for ln in lines)


@pytest.mark.parametrize("command", ["simulate", "whatif", "evaluate", "ingest", "train"])
def test_help_cuts_no_word(command: str) -> None:
    result = invoke(command, "--help")
    assert result.exit_code == 0
    assert "…" not in result.output
    assert max(len(ln) for ln in result.output.splitlines()) <= 80


def test_stats_distributions_cut_no_number(tmp_path: Path) -> None:
    """Theta-like figures (waits of 145 days, requested-to-run factors in the thousands, 4,048
    cores) filled every column of the distributions at once and cut one (issue 41)."""
    from benchmarks.builders.job_tables import job_table, write_job_table

    rows = [{"submit": 60 * i, "run_time_s": 10 + (i % 7) * 3, "req_cpus": 4048 - i % 3,
             "req_walltime_s": 86400, "wait": 145 * 86400 + 51840 + i, "user": f"u{i % 5}"}
            for i in range(300)]
    table = write_job_table(tmp_path / "jobs.parquet", job_table(rows), [{"MaxProcs": 4096}])
    result = invoke("stats", str(table))
    assert result.exit_code == 0, result.output
    assert not ELLIPSIS_IN_NUMBER.search(result.output), result.output
