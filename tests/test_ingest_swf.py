"""The SWF reader: header facts, field mapping, cleaning rules, bad input, and the real logs.

Expected values are derived by hand from the fixtures' text and the SWF definition, or (for
the real logs in ../shared/data) by reading the files independently with gzip and str.split.
"""

from __future__ import annotations

import gzip
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from conftest import DATA, shared_file
from typer.testing import CliRunner

from hpcpolicy.commands import app
from hpcpolicy.errors import InputFormatError
from hpcpolicy.ingest import IngestConfig, ingest, output_paths
from hpcpolicy.ingest.swf.header import read_header
from hpcpolicy.ingest.swf.reader import plan_swf

QUIRKS = DATA / "swf_quirks.swf"
REJECTS = DATA / "swf_rejects.swf"
ORIGIN = 1_000_000_000  # the quirks fixture's UnixStartTime


def _utc(seconds: int) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


def _ingest(path: Path, tmp: Path, **cfg: Any) -> tuple[pl.DataFrame, pl.DataFrame, Any]:
    out = tmp / f"{path.name}.parquet"
    report = ingest([path], out, IngestConfig(format="swf", overwrite=True, **cfg))
    paths = output_paths(out)
    return pl.read_parquet(paths["jobs"]), pl.read_parquet(paths["rejects"]), report


def _reasons(path: Path, **cfg: Any) -> dict[int, str | None]:
    """Line number -> reason code, from the reader's plan alone."""
    frame = plan_swf(path, IngestConfig(format="swf", **cfg)).frame
    rows = frame.select("_line", "_reason").collect().rows()
    return dict(rows)


# --- header ------------------------------------------------------------------------------

def test_header_keys_with_trailing_text_continuations_and_repeats() -> None:
    facts, notes = read_header(QUIRKS)
    assert notes == []
    assert facts["Version"] == "2.2"
    assert facts["UnixStartTime"] == ORIGIN
    assert facts["MaxNodes"] == 64
    assert facts["MaxNodes_text"] == "64 (batch partition; 128 total)"
    assert facts["MaxProcs"] == 128
    assert facts["Information"] == "http://example.org/a http://example.org/b"
    assert facts["Queue"] == ["1 batch", "2 interactive"]
    assert facts["Note"] == "cleaned by a filter"
    assert facts["TimeZoneString"] == "Europe/Stockholm"


def test_a_numeric_key_that_is_not_a_number_is_kept_as_text(tmp_path: Path) -> None:
    path = tmp_path / "h.swf"
    path.write_text("; MaxProcs: many\n; MaxJobs: 12.0\n" + GOOD.format(n=1, p=1))
    facts, notes = read_header(path)
    assert facts["MaxProcs"] == "many" and facts["MaxJobs"] == 12
    assert notes == ["header MaxProcs 'many' is not a number; kept as text"]


# --- mapping -----------------------------------------------------------------------------

EXPECTED: dict[str, dict[str, Any]] = {
    # job 1: all fields known; memory 2048 KB/proc x 4 requested procs = 8 MiB
    "1": dict(submit_time=_utc(ORIGIN), start_time=_utc(ORIGIN + 10),
              end_time=_utc(ORIGIN + 110), wait_time_s=10, run_time_s=100, alloc_cpus=4,
              req_cpus=4, req_walltime_s=200, req_mem_mib=8, state="completed", user="7",
              group="3", qos="batch", partition="2"),
    # job 2 (tab-separated): wait unknown, so no start or end; status 0 = failed
    "2": dict(submit_time=_utc(ORIGIN + 5), start_time=None, end_time=None,
              wait_time_s=None, run_time_s=50, alloc_cpus=None, req_cpus=None,
              req_walltime_s=None, req_mem_mib=None, state="failed", user="8", group=None,
              qos=None, partition=None),
    # job 3: requested time 0 -> unknown; 1000 KB x 8 / 1024 = 7.8 -> 8 MiB; 5 = cancelled
    "3": dict(submit_time=_utc(ORIGIN + 20), start_time=_utc(ORIGIN + 20),
              end_time=_utc(ORIGIN + 20), wait_time_s=0, run_time_s=0, alloc_cpus=8,
              req_cpus=8, req_walltime_s=None, req_mem_mib=8, state="cancelled", user="7",
              group="3", qos="interactive", partition="1"),
    # job 4: wait 2.5 -> 2 (ties to even), run 60.4 -> 60; 0 requested procs -> unknown, so
    # memory uses the 2 allocated: 1024 x 2 / 1024 = 2 MiB; status -1 = unknown
    "4": dict(submit_time=_utc(ORIGIN + 30), start_time=_utc(ORIGIN + 32),
              end_time=_utc(ORIGIN + 92), wait_time_s=2, run_time_s=60, alloc_cpus=2,
              req_cpus=None, req_walltime_s=300, req_mem_mib=2, state="unknown", user="9",
              group="3", qos="batch", partition="1"),
    # job 5: requested procs unknown: 512 KB x 16 allocated / 1024 = 8 MiB
    "5": dict(submit_time=_utc(ORIGIN + 40), start_time=_utc(ORIGIN + 41),
              end_time=_utc(ORIGIN + 51), wait_time_s=1, run_time_s=10, alloc_cpus=16,
              req_cpus=None, req_walltime_s=100, req_mem_mib=8, state="completed", user="9",
              group="3", qos="batch", partition="1"),
    # job 6: the summary line; its two partial executions (status 2, 3) are folded
    "6": dict(submit_time=_utc(ORIGIN + 50), start_time=_utc(ORIGIN + 50),
              end_time=_utc(ORIGIN + 150), wait_time_s=0, run_time_s=100, alloc_cpus=4,
              req_cpus=4, req_walltime_s=200, req_mem_mib=None, state="completed", user="7",
              group="3", qos="batch", partition="1"),
}


def test_fields_map_to_the_job_table(tmp_path: Path) -> None:
    jobs, rejects, _ = _ingest(QUIRKS, tmp_path)
    assert rejects.height == 0
    assert jobs["job_id"].to_list() == list(EXPECTED)
    assert jobs["job_id_raw"].to_list() == [1, 2, 3, 4, 5, 6]
    for row in jobs.iter_rows(named=True):
        got = {k: row[k] for k in EXPECTED[row["job_id"]]}
        assert got == EXPECTED[row["job_id"]], row["job_id"]
    never = ["array_job_id", "het_job_id", "job_name", "account", "eligible_time",
             "req_nodes", "req_gpus", "alloc_gpus", "exit_code", "node_list"]
    assert jobs.select(pl.col(never).is_null().all()).row(0) == (True,) * len(never)


def test_counts_folds_and_repairs(tmp_path: Path) -> None:
    _, _, report = _ingest(QUIRKS, tmp_path)
    assert (report.rows_read, report.jobs_kept, report.rows_rejected, report.steps_folded) == (
        8, 6, 0, 2)
    assert report.repaired_by_rule == {
        "swf_fraction_rounded": 1, "swf_zero_request": 2, "swf_mem_by_alloc": 2}


def test_header_facts_reach_the_parquet_metadata(tmp_path: Path) -> None:
    out = tmp_path / "q.parquet"
    ingest([QUIRKS], out, IngestConfig())
    meta = pl.read_parquet_metadata(out)
    assert meta["hpcpolicy.source_format"] == "swf"
    [header] = json.loads(meta["hpcpolicy.header"])
    assert (header["MaxProcs"], header["MaxNodes"], header["UnixStartTime"]) == (128, 64, ORIGIN)


def test_gzip_reads_like_plain_even_in_several_members(tmp_path: Path) -> None:
    text = QUIRKS.read_bytes()
    cut = text.index(b"4 30 2.5")
    gz = tmp_path / "q.swf.gz"
    gz.write_bytes(gzip.compress(text[:cut]) + gzip.compress(text[cut:]))
    plain, _, _ = _ingest(QUIRKS, tmp_path)
    packed, _, report = _ingest(gz, tmp_path)
    assert packed.equals(plain)
    assert report.steps_folded == 2


# --- rejects -----------------------------------------------------------------------------

REJECT_LINES = {
    4: None, 5: "field_count", 6: "field_count", 7: "field_count", 8: "bad_number",
    9: "bad_number", 10: "no_job_id", 11: "no_job_id", 12: "no_submit_time",
    13: "swf_bad_status", 14: "swf_bad_status", 15: "absurd_value", 16: "absurd_value",
    17: "absurd_value", 18: "bad_number", 19: "swf_fractional_id",
}


def test_each_rule_rejects_its_line() -> None:
    assert _reasons(REJECTS) == REJECT_LINES


def test_rejects_keep_line_number_reason_and_text(tmp_path: Path) -> None:
    jobs, rejects, report = _ingest(REJECTS, tmp_path, max_reject_fraction=1.0)
    lines = REJECTS.read_text().splitlines()
    assert jobs["job_id"].to_list() == ["1"]
    assert report.rows_read == report.jobs_kept + report.rows_rejected == len(REJECT_LINES)
    assert dict(zip(rejects["line"], rejects["reason"], strict=True)) == {
        k: v for k, v in REJECT_LINES.items() if v}
    assert rejects["raw"].to_list() == [lines[n - 1] for n in rejects["line"]]
    assert set(rejects["source_file"]) == {str(REJECTS)}


def test_non_utf8_crlf_bom_and_no_final_newline(tmp_path: Path) -> None:
    good = b"1 0 0 10 1 -1 -1 1 10 -1 1 1 1 -1 1 1 -1 -1"
    path = tmp_path / "odd.swf"
    path.write_bytes(b"\xef\xbb\xbf; MaxProcs: 4\r\n" + good + b"\r\n"
                     + b"2 0 0 \xff\xfe 1 -1 -1 1 10 -1 1 1 1 -1 1 1 -1 -1\r\n"
                     + b"3 0 0 caf\xc3\xa9 1 -1 -1 1 10 -1 1 1 1 -1 1 1 -1 -1\r\n"
                     + good.replace(b"1", b"4", 1))
    assert read_header(path)[0] == {"MaxProcs": 4}
    assert _reasons(path) == {2: None, 3: "non_utf8", 4: "bad_number", 5: None}
    jobs, rejects, _ = _ingest(path, tmp_path, max_reject_fraction=1.0)
    assert jobs["job_id"].to_list() == ["1", "4"]
    assert rejects["raw"].to_list() == [
        "2 0 0 \ufffd\ufffd 1 -1 -1 1 10 -1 1 1 1 -1 1 1 -1 -1",
        "3 0 0 café 1 -1 -1 1 10 -1 1 1 1 -1 1 1 -1 -1"]


def test_control_characters_in_a_rejected_line_are_shown_not_obeyed(tmp_path: Path) -> None:
    path = tmp_path / "ctl.swf"
    path.write_bytes(b"1 0 0 10 1 -1 -1 1 10 -1 1 1 1 -1 1 1 -1 -1\n"
                     b"2 \x1f\x00 \x1b[31m\"q\"\n")
    _, rejects, _ = _ingest(path, tmp_path, max_reject_fraction=1.0)
    assert rejects.select("line", "reason", "raw").rows() == [
        (2, "field_count", "2 \ufffd\ufffd \ufffd[31m\"q\"")]


# --- machine size and time origin ----------------------------------------------------------

GOOD = "{n} 0 0 10 {p} -1 -1 {p} 10 -1 1 1 1 -1 1 1 -1 -1\n"


def _log(tmp: Path, header: str, sizes: list[int]) -> Path:
    path = tmp / "m.swf"
    path.write_text(header + "".join(GOOD.format(n=i + 1, p=p) for i, p in enumerate(sizes)))
    return path


@pytest.mark.parametrize(("header", "procs", "value", "how", "note"), [
    ("", None, 48, "largest processor count", "taken as 48 processors"),
    ("", 64, 64, "given with --procs", None),
    ("; MaxNodes: 256\n", None, 256, "header MaxNodes", "256 processors taken from MaxNodes"),
    ("; MaxProcs: 100\n", 128, 128, "given with --procs", "--procs 128 overrides"),
])
def test_machine_size_when_the_header_lacks_maxprocs(
    tmp_path: Path, header: str, procs: int | None, value: int, how: str, note: str | None
) -> None:
    plan = plan_swf(_log(tmp_path, header, [4, 48, 16]), IngestConfig(procs=procs))
    assert plan.inferred["MaxProcs"]["value"] == value
    assert how in plan.inferred["MaxProcs"]["how"]
    sized = [n for n in plan.notes if "UnixStartTime" not in n]
    if note is None:
        assert sized == []
    else:
        assert len(sized) == 1 and note in sized[0], sized


def test_header_maxprocs_needs_no_inference(tmp_path: Path) -> None:
    plan = plan_swf(_log(tmp_path, "; MaxProcs: 100\n; UnixStartTime: 7\n", [4]),
                    IngestConfig(procs=100))
    assert plan.inferred == {} and plan.notes == []


def test_without_unixstarttime_times_count_from_the_epoch(tmp_path: Path) -> None:
    path = _log(tmp_path, "; MaxProcs: 8\n", [4])
    plan = plan_swf(path, IngestConfig())
    assert plan.inferred["time_origin"]["value"] == "1970-01-01T00:00:00+00:00"
    jobs, _, _ = _ingest(path, tmp_path)
    assert jobs["submit_time"].to_list() == [_utc(0)]


# --- bad input through the command line -----------------------------------------------------

def _cli(*args: str) -> Any:
    return CliRunner().invoke(app, ["ingest", *args])


def _error_line(result: Any) -> str:
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return str(lines[0])


def _write(tmp: Path, name: str, data: bytes) -> Path:
    path = tmp / name
    path.write_bytes(data)
    return path


@pytest.mark.parametrize(("name", "data", "texts"), [
    ("empty.swf", b"", ["empty.swf", "empty"]),
    ("comments.swf", b"; Version: 2.2\n; MaxProcs: 4\n", ["comments.swf", "no job rows"]),
    ("binary.swf", bytes(range(256)) * 64, ["binary.swf", "rejected", "--format"]),
    ("noline.swf", b"7" * (2 << 20), ["noline.swf", "line 1", "not a line of an SWF text log",
                                      "--max-line-bytes"]),
    ("shifted.swf", b"1 2 3\n" * 10, ["shifted.swf", "100% of 10 rows", "field_count: 10"]),
])
def test_bad_input_is_one_clear_line(tmp_path: Path, name: str, data: bytes,
                                     texts: list[str]) -> None:
    source = _write(tmp_path, name, data)
    out = tmp_path / "out" / "jobs.parquet"
    line = _error_line(_cli(str(source), "--format", "swf", "-o", str(out)))
    for text in texts:
        assert text in line, (text, line)
    assert not out.parent.exists() or not list(out.parent.iterdir())


def test_truncated_gzip_is_reported_with_the_last_line_read(tmp_path: Path) -> None:
    body = "".join(GOOD.format(n=i, p=4) for i in range(1, 300_001)).encode()
    packed = gzip.compress(body)
    source = _write(tmp_path, "cut.swf.gz", packed[: len(packed) * 3 // 4])
    out = tmp_path / "out" / "jobs.parquet"
    with pytest.raises(InputFormatError, match=r"cut\.swf\.gz: the gzip stream is truncated "
                       r"after line \d+; copy or download"):
        ingest([source], out, IngestConfig(format="swf", procs=4))
    assert not out.parent.exists() or not list(out.parent.iterdir())


def test_absurd_and_malformed_rows_are_rejected_not_fatal(tmp_path: Path) -> None:
    out = tmp_path / "r.parquet"
    result = _cli(str(REJECTS), "-o", str(out), "--max-reject-fraction", "1")
    assert result.exit_code == 0, result.output
    assert "absurd_value" in result.stdout and "swf_bad_status" in result.stdout
    assert pl.read_parquet(output_paths(out)["rejects"]).height == 15


# --- the real logs in ../shared/data --------------------------------------------------------

REAL = {  # file -> data lines documented by ../shared/data/README.md
    "lublin_256.swf": 10_000,
    "KTH-SP2-1996-2.1-cln.swf.gz": 27_992,
    "CTC-SP2-1996-3.1-cln.swf.gz": 77_222,
    "HPC2N-2002-2.2-cln.swf.gz": 202_871,
    "RICC-2010-2.swf.gz": 447_794,
}


def _data_lines(path: Path, every: int) -> tuple[list[str], list[list[str]]]:
    """Job numbers of all data lines, and the fields of every ``every``-th one, read with
    gzip and str.split."""
    opener = gzip.open if path.suffix == ".gz" else open
    ids: list[str] = []
    sample: list[list[str]] = []
    with opener(path, "rt", encoding="utf-8") as f:
        for line in f:
            if line.strip() and not line.lstrip().startswith(";"):
                fields = line.split()
                if len(ids) % every == 0:
                    sample.append(fields)
                ids.append(fields[0])
    return ids, sample


@pytest.fixture(scope="module")
def real_tables(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("real")
    tables = {}
    for name in REAL:
        path = shared_file(name)
        out = tmp / f"{name}.parquet"
        report = ingest([path], out, IngestConfig())
        tables[name] = (path, pl.read_parquet(out), report)
    return tables


@pytest.mark.parametrize("name", sorted(REAL))
def test_real_log_reads_every_record(real_tables: dict[str, Any], name: str) -> None:
    path, jobs, report = real_tables[name]
    ids, sample = _data_lines(path, every=97)
    assert len(ids) == REAL[name]
    assert report.rows_read == len(ids)
    assert report.rows_read == report.jobs_kept + report.rows_rejected + report.steps_folded
    assert (report.rows_rejected, report.steps_folded) == (0, 0)
    assert jobs["job_id"].to_list() == ids
    # every 97th record, field by field, against the text
    origin = report.inputs[0]["header"].get("UnixStartTime", 0)
    for row, f in zip(jobs.gather_every(97).iter_rows(named=True), sample, strict=True):
        num = [float(x) for x in f]
        assert row["submit_time"] == _utc(origin + round(num[1]))
        assert row["run_time_s"] == (None if num[3] == -1 else round(num[3]))
        assert row["wait_time_s"] == (None if num[2] == -1 else round(num[2]))
        assert row["alloc_cpus"] == (None if num[4] == -1 else round(num[4]))
        assert row["req_walltime_s"] == (None if num[8] in (-1, 0) else round(num[8]))
        assert row["state"] == {1: "completed", 0: "failed", 5: "cancelled", -1: "unknown"}[
            int(num[10])]


def test_real_headers_and_machine_sizes(real_tables: dict[str, Any]) -> None:
    sizes = {}
    for name, (_, _, report) in real_tables.items():
        source = report.inputs[0]
        sizes[name] = source["header"].get("MaxProcs") or source["inferred"]["MaxProcs"]["value"]
    # MaxProcs from the headers; lublin_256 from MaxNodes; RICC (no header) from its largest
    # job, 8,192, the machine size the archive's page gives
    assert sizes == {"lublin_256.swf": 256, "KTH-SP2-1996-2.1-cln.swf.gz": 100,
                     "CTC-SP2-1996-3.1-cln.swf.gz": 338, "HPC2N-2002-2.2-cln.swf.gz": 240,
                     "RICC-2010-2.swf.gz": 8192}
    ctc = real_tables["CTC-SP2-1996-3.1-cln.swf.gz"][2].inputs[0]["header"]
    assert ctc["MaxNodes_text"] == "338 (batch partition; 512 total)"
