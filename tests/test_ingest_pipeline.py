"""The ingest pipeline, tested through a tiny fake reader (``tests/data/pipeline_fake_reader.py``,
format described there) so that it does not depend on the real SWF and sacct readers."""

from __future__ import annotations

import hashlib
import json
import sys
import types
from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hpcpolicy.errors import ConfigError, InputFormatError
from hpcpolicy.ingest import IngestConfig, ReaderPlan, ingest, output_paths, pipeline
from hpcpolicy.schema import SCHEMA_VERSION, polars_schema

DATA = Path(__file__).resolve().parent / "data"
FAKE_HEADER = {"MaxProcs": 64, "TimeZoneString": "Europe/Stockholm"}  # as the fake reader says
FAKE_NOTE = "fake reader: no wait times"


@pytest.fixture(autouse=True)
def fake_reader(monkeypatch: pytest.MonkeyPatch) -> None:
    """Register the fake reader as the ``swf`` format for these tests."""
    monkeypatch.syspath_prepend(str(DATA))
    monkeypatch.setitem(pipeline.READERS, "swf", "pipeline_fake_reader:plan_fake")


def _write(tmp_path: Path, name: str, lines: list[str]) -> Path:
    path = tmp_path / name
    path.write_text("".join(f"{ln}\n" for ln in lines))
    return path


MIXED = [
    "# fake log",                   # line 1: comment, not a row
    "1,1700000000,60,4,job",        # 2 kept
    "1.batch,1700000000,60,4,step",  # 3 folded
    "2,1700000100,120,,job",        # 4 kept, cpus repaired
    "3,not-a-time,30,2,job",        # 5 rejected: bad_number
    "4,1700000200,10,8,job",        # 6 kept
    "4.0,1700000200,10,8,step",     # 7 folded
    "5,1700000300,5,,job",          # 8 kept, cpus repaired
]
SWF = IngestConfig(format="swf")


def _files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def test_counts_balance_and_are_stored(tmp_path: Path) -> None:
    log = _write(tmp_path, "log.txt", MIXED)
    report = ingest([log], tmp_path / "jobs.parquet", SWF)
    assert (report.rows_read, report.jobs_kept, report.steps_folded, report.rows_rejected) == (
        7, 4, 2, 1)
    assert report.rows_read == report.jobs_kept + report.rows_rejected + report.steps_folded
    assert report.rejected_by_reason == {"bad_number": 1}
    stored = json.loads((tmp_path / "jobs.ingest.json").read_text())
    for key in ("rows_read", "jobs_kept", "steps_folded", "rows_rejected", "rejected_by_reason"):
        assert stored[key] == getattr(report, key)
    assert stored["notes"] == [FAKE_NOTE]
    assert stored["inputs"][0]["rows_read"] == 7 and stored["inputs"][0]["jobs_kept"] == 4
    assert pl.read_parquet(tmp_path / "jobs.parquet")["job_id"].to_list() == ["1", "2", "4", "5"]
    assert stored["time_span"]["first_submit"].startswith("2023-11-14T22:13:20")


def test_rejects_carry_file_line_raw_and_reason(tmp_path: Path) -> None:
    log = _write(tmp_path, "log.txt", MIXED)
    ingest([log], tmp_path / "jobs.parquet", SWF)
    rejects = pl.read_parquet(tmp_path / "jobs.rejects.parquet")
    assert rejects.columns == ["source_file", "line", "job_id", "reason", "raw"]
    assert rejects.rows(named=True) == [{
        "source_file": str(log), "line": 5, "job_id": "3", "reason": "bad_number",
        "raw": "3,not-a-time,30,2,job",
    }]


def test_repairs_are_counted_and_applied(tmp_path: Path) -> None:
    log = _write(tmp_path, "log.txt", MIXED)
    report = ingest([log], tmp_path / "jobs.parquet", SWF)
    assert report.repaired_by_rule == {"default_cpus": 2}
    jobs = pl.read_parquet(tmp_path / "jobs.parquet").filter(pl.col("job_id").is_in(["2", "5"]))
    assert jobs["req_cpus"].to_list() == [1, 1]


def test_metadata_names_schema_format_hash_and_header(tmp_path: Path) -> None:
    log = _write(tmp_path, "log.txt", MIXED)
    ingest([log], tmp_path / "jobs.parquet", SWF)
    meta = pl.read_parquet_metadata(tmp_path / "jobs.parquet")
    assert meta["hpcpolicy.schema_version"] == SCHEMA_VERSION
    assert meta["hpcpolicy.source_format"] == "swf"
    assert meta["hpcpolicy.tz"] == "UTC"
    assert json.loads(meta["hpcpolicy.header"]) == [FAKE_HEADER]
    (source,) = json.loads(meta["hpcpolicy.sources"])
    assert source["sha256"] == hashlib.sha256(log.read_bytes()).hexdigest()
    assert source["path"] == str(log) and source["bytes"] == log.stat().st_size


def test_written_table_has_exactly_the_canonical_schema(tmp_path: Path) -> None:
    log = _write(tmp_path, "log.txt", MIXED)
    ingest([log], tmp_path / "jobs.parquet", SWF)
    written = pl.read_parquet_schema(tmp_path / "jobs.parquet")
    assert list(written.items()) == list(polars_schema().items())


def test_several_inputs_are_one_log(tmp_path: Path) -> None:
    a = _write(tmp_path, "a.txt", MIXED)
    b = _write(tmp_path, "b.txt", ["9,1700000400,60,2,job", "9.batch,1700000400,60,2,step"])
    report = ingest([a, b], tmp_path / "jobs.parquet", SWF)
    assert (report.rows_read, report.jobs_kept, report.steps_folded) == (9, 5, 3)
    assert [(s["path"], s["rows_read"], s["jobs_kept"]) for s in report.inputs] == [
        (str(a), 7, 4), (str(b), 2, 1)]


def test_reader_failing_mid_stream_leaves_no_file(tmp_path: Path) -> None:
    log = _write(tmp_path, "log.txt", [*MIXED, "6,1700000400,5,1,boom"])
    with pytest.raises(InputFormatError, match="mid-way"):
        ingest([log], tmp_path / "jobs.parquet", SWF)
    assert _files(tmp_path) == ["log.txt"]


def test_reader_failing_at_plan_time_leaves_no_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(path: Path, cfg: IngestConfig) -> ReaderPlan:
        raise InputFormatError(f"{path}: line 1: not this format")

    monkeypatch.setitem(sys.modules, "refusing_reader", types.SimpleNamespace(plan=refuse))
    monkeypatch.setitem(pipeline.READERS, "swf", "refusing_reader:plan")
    log = _write(tmp_path, "log.txt", MIXED)
    with pytest.raises(InputFormatError, match="line 1"):
        ingest([log], tmp_path / "jobs.parquet", SWF)
    assert _files(tmp_path) == ["log.txt"]


def test_too_many_rejects_fails_and_leaves_no_file(tmp_path: Path) -> None:
    log = _write(tmp_path, "log.txt", ["1,x,1,1,job", "2,y,1,1,job", "3,1700000000,1,1,job"])
    with pytest.raises(InputFormatError, match=r"67% of 3 rows rejected \(bad_number: 2\)"):
        ingest([log], tmp_path / "jobs.parquet", SWF)
    assert _files(tmp_path) == ["log.txt"]
    report = ingest([log], tmp_path / "jobs.parquet",
                    IngestConfig(format="swf", max_reject_fraction=0.7))
    assert (report.jobs_kept, report.rows_rejected) == (1, 2)


def test_a_log_of_comments_only_is_refused(tmp_path: Path) -> None:
    log = _write(tmp_path, "log.txt", ["# nothing", "# here"])
    with pytest.raises(InputFormatError, match="no job rows found"):
        ingest([log], tmp_path / "jobs.parquet", SWF)
    assert _files(tmp_path) == ["log.txt"]


def test_existing_outputs_refused_without_overwrite_and_replaced_with_it(tmp_path: Path) -> None:
    log = _write(tmp_path, "log.txt", MIXED)
    out = tmp_path / "jobs.parquet"
    ingest([log], out, SWF)
    before = {p: p.read_bytes() for p in output_paths(out).values()}
    for existing in output_paths(out).values():
        with pytest.raises(ConfigError, match=rf"{existing.name}.*--overwrite"):
            ingest([log], out, SWF)
        assert {p: p.read_bytes() for p in output_paths(out).values()} == before
    smaller = _write(tmp_path, "log2.txt", MIXED[:3])
    report = ingest([smaller], out, IngestConfig(format="swf", overwrite=True))
    assert report.jobs_kept == 1
    assert pl.read_parquet(out).height == 1
    assert pl.read_parquet(output_paths(out)["rejects"]).height == 0
    assert json.loads(output_paths(out)["report"].read_text())["jobs_kept"] == 1
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".part")]


def test_only_one_existing_output_is_enough_to_refuse(tmp_path: Path) -> None:
    log = _write(tmp_path, "log.txt", MIXED)
    (tmp_path / "jobs.rejects.parquet").write_bytes(b"keep me")
    with pytest.raises(ConfigError, match=r"jobs\.rejects\.parquet already exist"):
        ingest([log], tmp_path / "jobs.parquet", SWF)
    assert (tmp_path / "jobs.rejects.parquet").read_bytes() == b"keep me"


def test_output_must_be_named_parquet(tmp_path: Path) -> None:
    log = _write(tmp_path, "log.txt", MIXED)
    with pytest.raises(ConfigError, match=r"NAME\.parquet"):
        ingest([log], tmp_path / "jobs.csv", SWF)


def test_explicit_format_still_checks_the_file(tmp_path: Path) -> None:
    with pytest.raises(InputFormatError, match="no such file"):
        ingest([tmp_path / "absent.swf"], tmp_path / "jobs.parquet", SWF)
    empty = _write(tmp_path, "empty.swf", [])
    with pytest.raises(InputFormatError, match="empty"):
        ingest([empty], tmp_path / "jobs.parquet", SWF)


_LINE = st.one_of(
    st.builds(lambda i, t, c: f"{i},{t},{i % 50},{c},job", st.integers(1, 10**6),
              st.integers(0, 2 * 10**9), st.sampled_from(["", "1", "16"])),
    st.builds(lambda i: f"{i}.batch,1700000000,1,1,step", st.integers(1, 10**6)),
    st.builds(lambda i, t: f"{i},{t},1,1,job", st.integers(1, 10**6),
              st.text(alphabet="xyz-:. ", min_size=0, max_size=8)),
    st.just("# comment"),
)


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=st.lists(_LINE, min_size=1, max_size=30))
def test_counts_always_balance(tmp_path_factory: pytest.TempPathFactory, lines: list[str]) -> None:
    folder = tmp_path_factory.mktemp("prop")
    log = _write(folder, "log.txt", lines)
    rows = [ln for ln in lines if not ln.startswith("#")]
    try:
        report = ingest([log], folder / "jobs.parquet", IngestConfig(format="swf",
                                                                     max_reject_fraction=1.0))
    except InputFormatError as exc:  # only when every row is a step or a comment
        assert "no job rows" in str(exc)
        assert all(",step" in ln for ln in rows)
        assert _files(folder) == ["log.txt"]
        return
    assert report.rows_read == len(rows)
    assert report.rows_read == report.jobs_kept + report.rows_rejected + report.steps_folded
    assert pl.read_parquet(folder / "jobs.parquet").height == report.jobs_kept
    assert pl.read_parquet(folder / "jobs.rejects.parquet").height == report.rows_rejected
