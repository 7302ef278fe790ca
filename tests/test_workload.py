"""Workload.from_table: conventions, drops with reasons, presets, and errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchmarks.builders.job_tables import T0, write_job_table
from benchmarks.builders.job_tables import job_table as table
from hpcpolicy.errors import ConfigError, InputFormatError, SchemaValidationError
from hpcpolicy.workload import DROP_REASONS, Workload, WorkloadOptions

BASE = [
    # job 1..5; submit order differs from table order for jobs 2 and 3
    {"submit": 0, "wait": 5, "run_time_s": 100, "req_cpus": 4, "alloc_cpus": 4,
     "req_walltime_s": 200, "user": "ann", "partition": "batch"},
    {"submit": 30, "wait": 0, "run_time_s": 0, "req_cpus": None, "alloc_cpus": 8,
     "req_walltime_s": 60, "user": "bob", "partition": "debug"},
    {"submit": 20, "wait": 1, "run_time_s": 50, "req_cpus": 2, "alloc_cpus": 6,
     "req_walltime_s": None, "user": "ann", "partition": "debug"},
    {"submit": 40, "run_time_s": None, "req_cpus": 1, "alloc_cpus": None,
     "req_walltime_s": 10, "user": None, "partition": "batch", "state": "cancelled"},
    {"submit": 40, "wait": 2, "run_time_s": 7, "req_cpus": 16, "alloc_cpus": 16,
     "req_walltime_s": None, "user": "cy", "partition": "batch"},
]


def test_defaults_sort_by_submit_and_resolve_columns() -> None:
    w = Workload.from_table(table(BASE))
    # job 4 (no run time) is dropped; the rest sorted by submit, ties in table order
    assert w.job_id.tolist() == ["1", "3", "2", "5"]
    assert w.submit.tolist() == [0, 20, 30, 40]
    assert w.origin == int(T0.timestamp())
    # requested processors, alloc_cpus where the request is unknown (job 2)
    assert w.procs.tolist() == [4, 2, 8, 16]
    assert w.run_time.tolist() == [100, 50, 0, 7]
    # walltime 'auto' = the longest request in the job's partition: debug 60, batch 200
    assert w.req_walltime.tolist() == [200, 60, 60, 200]
    assert w.logged_start.tolist() == [5, 21, 30, 42]
    assert w.users == ("ann", "bob", "cy") and w.user.tolist() == [0, 0, 1, 2]
    assert w.partitions == ("batch", "debug") and w.partition.tolist() == [0, 1, 1, 0]
    assert w.dropped == {"no_run_time": ("4",)}
    assert any("1 jobs lack req_cpus" in n for n in w.notes)
    assert any("2 of 4 jobs have no requested walltime" in n for n in w.notes)
    assert any(DROP_REASONS["no_run_time"] in n for n in w.notes)


@pytest.mark.parametrize(("mode", "procs"), [
    ("requested", [4, 2, 8, 16]),
    ("allocated", [4, 6, 8, 16]),
    ("max", [4, 6, 8, 16]),
])
def test_procs_from(mode: str, procs: list[int]) -> None:
    w = Workload.from_table(table(BASE), options=WorkloadOptions(procs_from=mode))
    assert w.procs.tolist() == procs


def test_zero_runtime_dropped_only_when_asked_and_unknown_runtime_filled() -> None:
    opts = WorkloadOptions(drop_zero_runtime=True, unknown_run_time_s=10,
                           walltime_fallback="runtime")
    w = Workload.from_table(table(BASE), options=opts)
    assert w.job_id.tolist() == ["1", "3", "4", "5"]
    assert w.run_time.tolist() == [100, 50, 10, 7]
    # runtime fallback: jobs 3 and 5 are planned with their actual run time
    assert w.req_walltime.tolist() == [200, 50, 10, 7]
    assert w.dropped == {"zero_run_time": ("2",)}


def test_walltime_fallbacks() -> None:
    assert Workload.from_table(
        table(BASE), options=WorkloadOptions(walltime_fallback=3600)
    ).req_walltime.tolist() == [200, 3600, 60, 3600]
    # a partition with no request at all falls back to the table's longest request
    rows = [{**r, "partition": "solo"} if i == 2 else r for i, r in enumerate(BASE)]
    assert Workload.from_table(table(rows)).req_walltime.tolist() == [200, 200, 60, 200]
    with pytest.raises(ConfigError, match=r"2 of 4 jobs have no requested walltime.*"
                                          r"--walltime-fallback runtime"):
        Workload.from_table(table(BASE), options=WorkloadOptions(walltime_fallback="error"))


def test_table_without_any_walltime_asks_for_a_fallback() -> None:
    rows = [{**r, "req_walltime_s": None} for r in BASE]
    with pytest.raises(ConfigError, match="4 of 4 jobs have no requested walltime"):
        Workload.from_table(table(rows))
    w = Workload.from_table(table(rows), options=WorkloadOptions(walltime_fallback="runtime"))
    assert w.req_walltime.tolist() == w.run_time.tolist()


def test_rlscheduler_preset() -> None:
    opts = WorkloadOptions.preset("rlscheduler")
    assert opts.compat == "rlscheduler"
    w = Workload.from_table(table(BASE), options=opts)
    # max(allocated, requested); run time 0 dropped; unknown run time read as 10 s;
    # missing requested time replaced by the run time
    assert w.job_id.tolist() == ["1", "3", "4", "5"]
    assert w.procs.tolist() == [4, 6, 1, 16]
    assert w.req_walltime.tolist() == [200, 50, 10, 7]
    assert w.dropped == {"zero_run_time": ("2",)}


def test_hpcopt_preset_and_explicit_override() -> None:
    w = Workload.from_table(table(BASE), options=WorkloadOptions.preset("hpcopt"))
    # dropped only when run time or the logged start (wait) is missing; zero run time kept
    assert w.job_id.tolist() == ["1", "3", "2", "5"]
    assert w.dropped == {"no_run_time": ("4",)}
    opts = WorkloadOptions.preset("hpcopt", procs_from="allocated", drop_zero_runtime=None)
    assert (opts.procs_from, opts.drop_zero_runtime) == ("allocated", False)
    rows = [{k: v for k, v in r.items() if k != "wait"} for r in BASE]
    with pytest.raises(ConfigError, match=r"all 5 jobs were dropped \(no_logged_start: 4, "
                                          r"no_run_time: 1\)"):
        Workload.from_table(table(rows), options=WorkloadOptions.preset("hpcopt"))


def test_job_without_processors_is_dropped_with_a_reason() -> None:
    rows = [*BASE, {"submit": 50, "wait": 0, "run_time_s": 5, "req_cpus": None,
                    "alloc_cpus": 0, "req_walltime_s": 9}]
    w = Workload.from_table(table(rows))
    assert w.dropped["no_procs"] == ("6",)
    assert len(w) == 4


def test_from_parquet_path_and_take(tmp_path: Path) -> None:
    w = Workload.from_table(write_job_table(tmp_path / "jobs.parquet", table(BASE)))
    assert w.job_id.tolist() == ["1", "3", "2", "5"]
    sub = w.take(np.arange(1, 3))
    assert sub.job_id.tolist() == ["3", "2"] and sub.dropped == w.dropped
    assert sub.options == w.options and sub.users == w.users


def test_lazy_frame_with_only_some_columns() -> None:
    lf = pl.LazyFrame({"job_id": ["a"], "submit_time": [T0], "run_time_s": [3],
                       "alloc_cpus": [2], "req_walltime_s": [9]})
    w = Workload.from_table(lf)
    assert (w.procs.tolist(), w.nodes.tolist(), w.gpus.tolist()) == ([2], [0], [0])
    assert w.logged_start.tolist() == [-1]


def test_bad_sources(tmp_path: Path) -> None:
    with pytest.raises(InputFormatError, match="no such file"):
        Workload.from_table(tmp_path / "absent.parquet")
    junk = tmp_path / "junk.parquet"
    junk.write_bytes(b"not parquet at all")
    with pytest.raises(SchemaValidationError, match="not a Parquet file"):
        Workload.from_table(junk)
    plain = tmp_path / "plain.parquet"
    table(BASE).write_parquet(plain)
    with pytest.raises(SchemaValidationError, match="not an hpcpolicy job table"):
        Workload.from_table(plain)
    with pytest.raises(SchemaValidationError, match="run_time_s missing"):
        Workload.from_table(pl.DataFrame({"job_id": ["1"], "submit_time": [T0]}))
    with pytest.raises(InputFormatError, match="the job table is empty"):
        Workload.from_table(table([]))


def test_option_validation_names_the_field() -> None:
    with pytest.raises(ConfigError, match="procs_from 'alloc'"):
        WorkloadOptions(procs_from="alloc")
    with pytest.raises(ConfigError, match="walltime_fallback 'perfect'"):
        WorkloadOptions(walltime_fallback="perfect")
    with pytest.raises(ConfigError, match="compat 'pbs'"):
        WorkloadOptions.preset("pbs")
    with pytest.raises(ConfigError, match="--compat slurm is a replay of Slurm itself"):
        WorkloadOptions.preset("slurm")
    assert WorkloadOptions.parse_walltime_fallback("3600") == 3600
    assert WorkloadOptions.parse_walltime_fallback("runtime") == "runtime"


maybe = lambda values: st.one_of(st.none(), values)  # noqa: E731
ROWS = st.lists(st.fixed_dictionaries({
    "submit": st.integers(0, 1000),
    "wait": maybe(st.integers(0, 100)),
    "run_time_s": maybe(st.integers(0, 50)),
    "req_cpus": maybe(st.integers(1, 8)),
    "alloc_cpus": maybe(st.integers(0, 8)),
    "req_walltime_s": maybe(st.integers(1, 60)),
    "partition": maybe(st.sampled_from(["a", "b"])),
}), min_size=1, max_size=30)


@settings(max_examples=60, deadline=None)
@given(rows=ROWS, mode=st.sampled_from(["requested", "allocated", "max"]),
       compat=st.sampled_from([None, "rlscheduler", "hpcopt"]))
def test_every_job_is_kept_or_dropped_with_a_reason(
    rows: list[dict[str, object]], mode: str, compat: str | None
) -> None:
    opts = WorkloadOptions.preset(compat, procs_from=mode, walltime_fallback=120)
    try:
        w = Workload.from_table(table(rows), options=opts)
    except ConfigError as exc:
        assert "all" in str(exc) and "jobs were dropped" in str(exc)
        return
    dropped = [i for ids in w.dropped.values() for i in ids]
    assert sorted(w.job_id.tolist() + dropped, key=int) == [str(i + 1) for i in range(len(rows))]
    assert set(w.dropped) <= set(DROP_REASONS)
    assert np.all(np.diff(w.submit) >= 0) and w.submit[0] == 0
    assert np.all(w.procs >= 1) and np.all(w.run_time >= 0) and np.all(w.req_walltime >= 1)


# --- real traces, checked against the raw SWF fields read independently here ---

def _raw_swf(path: Path) -> np.ndarray:
    import gzip

    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:
        rows = [line.split()[:18] for line in f if line.strip() and not line.startswith(";")]
    return np.array(rows, dtype=np.float64).astype(np.int64)


@pytest.fixture(scope="module")
def hpc2n(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, np.ndarray]:
    from conftest import shared_file

    from hpcpolicy.ingest import ingest

    source = shared_file("HPC2N-2002-2.2-cln.swf.gz")
    out = tmp_path_factory.mktemp("hpc2n") / "hpc2n.parquet"
    ingest([source], out)
    return out, _raw_swf(source)


def test_hpc2n_under_hpcopt_conventions(hpc2n: tuple[Path, np.ndarray]) -> None:
    path, raw = hpc2n
    w = Workload.from_table(path, options=WorkloadOptions.preset("hpcopt"))
    keep = raw[:, 2] >= 0  # a record without a wait time is HPCOpt's only drop here
    assert len(w) == int(keep.sum()) == 202_870
    assert w.dropped == {"no_logged_start": tuple(str(i) for i in raw[~keep, 0])}
    kept = raw[keep]
    assert w.job_id.tolist() == [str(i) for i in kept[:, 0]]
    assert np.array_equal(w.procs, np.where(kept[:, 7] > 0, kept[:, 7], kept[:, 4]))
    assert np.array_equal(w.run_time, kept[:, 3])
    assert np.array_equal(w.submit, kept[:, 1] - kept[0, 1])
    assert np.array_equal(w.logged_start, kept[:, 1] + kept[:, 2] - kept[0, 1])
    assert np.array_equal(w.req_walltime, np.where(kept[:, 8] > 0, kept[:, 8], kept[:, 3]))


def test_hpc2n_under_rlscheduler_conventions(hpc2n: tuple[Path, np.ndarray]) -> None:
    path, raw = hpc2n
    w = Workload.from_table(path, options=WorkloadOptions.preset("rlscheduler"))
    keep = raw[:, 3] > 0  # run time 0 dropped (none in HPC2N)
    assert len(w) == int(keep.sum()) == 202_871
    assert np.array_equal(w.procs, np.maximum(raw[:, 4], raw[:, 7]))
    assert int((raw[:, 4] != raw[:, 7]).sum()) == 729  # where the preset's max matters
