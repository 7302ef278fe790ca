"""``simulate`` and ``fidelity`` with ``--compat slurm``: the Slurm flavour of the replay
(:mod:`hpcpolicy.slurm.replay`) on a node layout from ``--cluster`` or from the log.

``sacct_slurm_tiny.txt`` is written by hand so that every start follows from the flavour's
rules (4 nodes of 4 cores; ``short`` = n[3-4], ``batch`` = n[1-4]; every start lands in the
second of the submit or the end that freed it, so both fitted latencies are 0).
``sacct_slurm_real60.txt`` is the first 60 jobs of a real run of the test Slurm
(``benchmarks/slurm_replay.py``'s window, log 3 of RESULTS.md).
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from cli_helpers import invoke, one_line_error
from conftest import DATA

from hpcpolicy.cluster_io import cluster_from_dict
from hpcpolicy.errors import ConfigError
from hpcpolicy.hostlist import expand_hostlist, hostlist_size
from hpcpolicy.site.fidelity import section
from hpcpolicy.slurm.replay import SlurmReplayConfig, slurm_replay
from hpcpolicy.workload import Workload

TINY, REAL60 = DATA / "sacct_slurm_tiny.txt", DATA / "sacct_slurm_real60.txt"
TEST_SLURM = Path(__file__).resolve().parent.parent / "examples" / "slurm-test.toml"
TINY_STARTS = {"101": 0, "102": 0, "104": 2, "105": 32, "107": 52, "103": 60, "106": 60,
               "108": 60, "109": 61}
"""By hand: 101, 102 fill `short`; 103 and 106 wait for them (60 s); 104 takes 4 + 4 cores of
n1-n2 at once; 105 waits for 104's end (32 s); 107 (2 nodes) for 105's (52 s), and 108 (1
core of batch, behind 107) cannot pass it: the main pass closes batch's nodes once 107 does
not fit, and backfill plans 107 on n1-n2 from the 60 s slot, which 108's minute would cross;
at 60 s 108 takes the last core of n3 (the fullest node that holds it); 109 gets n4."""


def _ingest(tmp_path: Path, log: Path) -> Path:
    table = tmp_path / f"{log.stem}.parquet"
    result = invoke("-q", "ingest", str(log), "-o", str(table))
    assert result.exit_code == 0, result.output
    return table


def _starts(outcomes: Path) -> dict[str, int]:
    frame = pl.read_parquet(outcomes)
    return dict(zip(frame["job_id"].to_list(), frame["start"].to_list(), strict=True))


def _spec(tmp_path: Path, partitions: str, cores: int = 4) -> Path:
    path = tmp_path / "cluster.toml"
    path.write_text(f'[[groups]]\nname = "cpu"\ncount = 4\ncores = {cores}\n'
                    f'nodes = "n[1-4]"\n\n[partitions]\n{partitions}\n')
    return path


def test_simulate_infers_the_layout_and_starts_the_jobs_as_by_hand(tmp_path: Path) -> None:
    table = _ingest(tmp_path, TINY)
    out = tmp_path / "out.parquet"
    result = invoke("simulate", str(table), "--compat", "slurm", "--out", str(out))
    assert result.exit_code == 0, result.output
    assert "4 nodes x 4 cores; nodes per partition: batch 4, short 2 (from the log's " \
           "NodeList)" in " ".join(result.output.split())
    assert "cores per node inferred as 4" in result.output
    assert _starts(out) == TINY_STARTS
    # the same as the library call on the same jobs
    w = Workload.from_table(table)
    lib = slurm_replay(w, SlurmReplayConfig(cores_per_node=4, nodes=4),
                       {"batch": (0, 1, 2, 3), "short": (2, 3)})
    assert dict(zip(w.job_id.tolist(), lib.start.tolist(), strict=True)) == TINY_STARTS


def test_a_spec_with_partitions_gives_the_layout(tmp_path: Path) -> None:
    table = _ingest(tmp_path, TINY)
    out = tmp_path / "out.parquet"
    spec = _spec(tmp_path, 'batch = "cpu"\nshort = "n3,n4"')
    result = invoke("simulate", str(table), "--compat", "slurm", "--cluster", str(spec),
                    "--out", str(out))
    assert result.exit_code == 0, result.output
    assert _starts(out) == TINY_STARTS
    # bigger nodes: 103 and 106 no longer wait for `short`
    spec = _spec(tmp_path, 'batch = "n[1-4]"\nshort = "n[3-4]"', cores=8)
    result = invoke("simulate", str(table), "--compat", "slurm", "--cluster", str(spec),
                    "--out", str(out), "--overwrite")
    assert result.exit_code == 0, result.output
    assert _starts(out)["103"] == 1 and _starts(out)["106"] == 5


def test_a_spec_without_partitions_sizes_the_nodes_of_the_log(tmp_path: Path) -> None:
    table = _ingest(tmp_path, TINY)
    out = tmp_path / "out.parquet"
    spec = tmp_path / "plain.toml"
    spec.write_text('[[groups]]\nname = "cpu"\ncount = 4\ncores = 8\n')
    result = invoke("simulate", str(table), "--compat", "slurm", "--cluster", str(spec),
                    "--out", str(out))
    assert result.exit_code == 0, result.output
    assert "inferred as" not in result.output and "x 8 cores" in result.output
    assert _starts(out)["103"] == 1  # 8-core nodes: `short` has room at once
    spec.write_text('[[groups]]\nname = "cpu"\ncount = 3\ncores = 8\n')
    assert "3 nodes, but the log ran jobs on 4" in one_line_error(
        invoke("simulate", str(table), "--compat", "slurm", "--cluster", str(spec)))


def test_fidelity_figures_are_the_library_replay_of_a_real_log(tmp_path: Path) -> None:
    table = _ingest(tmp_path, REAL60)
    doc_path = tmp_path / "f.json"
    result = invoke("fidelity", str(table), "--compat", "slurm", "--cluster",
                    str(TEST_SLURM), "--json", str(doc_path))
    assert result.exit_code == 0, result.output
    doc = json.loads(doc_path.read_text())
    assert (doc["machine"]["cores"], doc["policy"]) == (64, "priority/basic")
    w = Workload.from_table(table)
    lib = slurm_replay(w, SlurmReplayConfig(cores_per_node=16, nodes=4),
                       {"batch": (0, 1, 2, 3), "short": (2, 3)})
    want = section((w.logged_start - w.submit).astype(float),
                   (lib.start - w.submit).astype(float))
    for key in ("jobs", "spearman", "mean_wait_rel_error", "median_abs_error_s"):
        assert doc["whole"][key] == pytest.approx(want[key]), key
    # and it is not the default replay's
    default = invoke("fidelity", str(table), "--cluster", str(TEST_SLURM), "--json",
                     str(doc_path), "--overwrite")
    assert default.exit_code == 0, default.output
    assert json.loads(doc_path.read_text())["whole"]["spearman"] != doc["whole"]["spearman"]


@pytest.mark.parametrize(("log", "args", "message"), [
    (DATA / "stats_tiny.swf", (), "has no NodeList to infer it from; give --cluster FILE"),
    (TINY, ("--cluster", "SPEC:batch = \"n1\"\nshort = \"n[3-4]\""),
     "job 104 asks for 2 nodes; partition 'batch' has 1"),
    (TINY, ("--cluster", "SPEC:batch = \"n[1-4]\""),
     "partition 'short' of the log has no nodes in the layout"),
    (TINY, ("--cluster", "SPEC:batch = \"n[1-5]\"\nshort = \"n3\""),
     "partitions.batch: node 'n5' is not a node of the layout"),
    (TINY, ("--policy", "sjf", "-b", "easy"), "drop --policy, --backfill"),
    (TINY, ("--procs", "10"), "--procs 10 does not divide over the log's 4 nodes"),
])
def test_what_the_flavour_lacks_is_one_line(tmp_path: Path, log: Path, args: tuple[str, ...],
                                            message: str) -> None:
    table = _ingest(tmp_path, log)
    args = tuple(str(_spec(tmp_path, a[5:])) if a.startswith("SPEC:") else a for a in args)
    assert message in one_line_error(invoke("simulate", str(table), "--compat", "slurm",
                                            *args))


def test_fidelity_takes_slurm_only_and_no_site_with_it(tmp_path: Path) -> None:
    table = _ingest(tmp_path, TINY)
    assert "takes slurm only" in one_line_error(
        invoke("fidelity", str(table), "--compat", "rlscheduler"))
    assert "drop --site" in one_line_error(
        invoke("fidelity", str(table), "--compat", "slurm", "--site", str(TINY)))


def test_hostlists_and_named_nodes_in_a_spec() -> None:
    assert expand_hostlist("n[1-3,7],gpu[08-09],login") == [
        "n1", "n2", "n3", "n7", "gpu08", "gpu09", "login"]
    assert expand_hostlist("r[1-2]n[1-2]") == ["r1n1", "r1n2", "r2n1", "r2n2"]
    for bad in ("n[1-", "n1]", "n[3-1]", "n[a]"):
        with pytest.raises(ConfigError, match="hostlist"):
            expand_hostlist(bad)
    with pytest.raises(ConfigError, match=r"nodes 'n\[1-3\]' names 3 nodes, count is 4"):
        cluster_from_dict({"groups": [{"name": "cpu", "count": 4, "cores": 1,
                                       "nodes": "n[1-3]"}]})
    spec = cluster_from_dict({"groups": [{"name": "cpu", "count": 2, "cores": 1}],
                              "partitions": {"p": "cpu,n[1-2]"}})
    assert spec.partitions == (("p", ("cpu", "n1", "n2")),)


def test_a_huge_hostlist_is_refused_before_it_is_expanded() -> None:
    """``n[1-1000000000]`` in a log's NodeList or a spec would take gigabytes (issue 38)."""
    assert hostlist_size("r[1-2]n[01-16],login") == 33
    with pytest.raises(ConfigError, match=r"names 1,000,000,000 nodes, more than the 1,000,000"):
        expand_hostlist("n[1-1000000000]")


def test_a_log_whose_nodelist_is_a_bomb_is_one_line(tmp_path: Path) -> None:
    text = TINY.read_text().replace("|n3\n", "|n[1-999999999]\n", 1)
    log = tmp_path / "bomb.txt"
    log.write_text(text)
    table = _ingest(tmp_path, log)
    line = one_line_error(invoke("simulate", str(table), "--compat", "slurm",
                                 "-o", str(tmp_path / "out.parquet")))
    assert "job 101's NodeList" in line and "999,999,999 nodes" in line


def test_nodelists_that_name_too_many_nodes_together_are_one_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from hpcpolicy.slurm import layout

    monkeypatch.setattr(layout, "_NODELIST_BUDGET", 3)
    line = one_line_error(invoke("simulate", str(_ingest(tmp_path, TINY)), "--compat", "slurm",
                                 "-o", str(tmp_path / "out.parquet")))
    assert "name more than 3 nodes in all" in line and "--cluster FILE" in line
