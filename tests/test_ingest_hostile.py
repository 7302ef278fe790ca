"""Hostile log text through ``hpcpolicy ingest``: out-of-range times, Rich markup and control
characters in the log, duplicate job ids, and a ``|`` inside a sacct job name (issue 28)."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from cli_helpers import invoke, one_line_error
from conftest import DATA

TINY = DATA / "stats_tiny.swf"


def _swf_with_origin(tmp_path: Path, origin: str) -> Path:
    text = TINY.read_text().replace("; UnixStartTime: 1709294400", f"; UnixStartTime: {origin}")
    path = tmp_path / "bad.swf"
    path.write_text(text)
    return path


@pytest.mark.parametrize("origin", ["253402300800", "-99999999999", "99999999999999999999999"])
def test_swf_start_time_out_of_range_is_one_line(tmp_path: Path, origin: str) -> None:
    log = _swf_with_origin(tmp_path, origin)
    line = one_line_error(invoke("ingest", str(log), "-o", str(tmp_path / "t.parquet")))
    assert "UnixStartTime" in line and origin in line
    assert not list(tmp_path.glob("t.*"))


def test_swf_times_past_year_9999_are_rejected_not_a_traceback(tmp_path: Path) -> None:
    # the latest origin allowed plus a submit offset runs past 9999-12-31: the row is absurd
    log = _swf_with_origin(tmp_path, "253402300000")
    result = invoke("ingest", str(log), "-o", str(tmp_path / "t.parquet"),
                    "--max-reject-fraction", "1")
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "t.ingest.json").read_text())
    assert report["rejected_by_reason"].get("absurd_value", 0) >= 1
    table = pl.read_parquet(tmp_path / "t.parquet")
    assert table["submit_time"].null_count() == 0


def test_table_with_null_submit_time_is_refused(tmp_path: Path) -> None:
    from hpcpolicy.errors import SchemaValidationError
    from hpcpolicy.table import open_job_table

    invoke("ingest", str(TINY), "-o", str(tmp_path / "t.parquet"))
    good = pl.read_parquet(tmp_path / "t.parquet")
    meta = pl.read_parquet_metadata(tmp_path / "t.parquet")
    bad = good.with_columns(pl.when(pl.col("job_id") == "3").then(None)
                            .otherwise(pl.col("submit_time")).alias("submit_time"))
    bad.write_parquet(tmp_path / "bad.parquet", metadata=meta)
    with pytest.raises(SchemaValidationError, match="submit_time") as info:
        open_job_table(tmp_path / "bad.parquet")
    assert "\n" not in str(info.value)
    line = one_line_error(invoke("simulate", str(tmp_path / "bad.parquet")))
    assert "null submit_time" in line


@pytest.mark.parametrize("value", ["[/]", "[link=https://example.org]click[/link]",
                                   "[bold red]x\x1b[31m\x07\u202e"])
def test_log_text_is_printed_plainly(tmp_path: Path, value: str) -> None:
    # A header value the reader quotes in a note, in a file whose name is markup too: printed
    # as text, never as Rich markup, with control characters shown escaped.
    text = TINY.read_text().replace("; UnixStartTime: 1709294400", f"; UnixStartTime: {value}")
    log = tmp_path / "[bold]odd.swf"
    log.write_text(text)
    result = invoke("ingest", str(log), "-o", str(tmp_path / "[i]t.parquet"))
    assert result.exit_code == 0, result.output
    shown = repr(value)[1:-1]  # the header note quotes the value as Python writes it
    assert shown in result.stdout and "[bold]odd.swf" in result.stdout
    assert "[i]t.parquet" in result.stdout
    assert "\x1b" not in result.stdout and "\x07" not in result.stdout


def test_error_line_escapes_control_characters(tmp_path: Path) -> None:
    missing = tmp_path / "gone\x1b[2J\x07.swf"
    line = one_line_error(invoke("ingest", str(missing), "-o", str(tmp_path / "t.parquet")))
    assert "gone\\u001b[2J\\u0007.swf" in line


def _report(tmp_path: Path, *logs: Path) -> dict:
    out = tmp_path / "d.parquet"
    result = invoke("ingest", *map(str, logs), "-o", str(out), "--overwrite",
                    "--max-reject-fraction", "1")
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "d.ingest.json").read_text())
    ids = pl.read_parquet(out)["job_id"]
    assert ids.n_unique() == ids.len()
    assert report["rows_read"] == (report["jobs_kept"] + report["rows_rejected"]
                                   + report["steps_folded"])
    return report


def test_duplicate_job_ids_within_one_swf_file(tmp_path: Path) -> None:
    lines = TINY.read_text().splitlines()
    again = next(ln for ln in lines if ln.split() and ln.split()[0] == "2")
    log = tmp_path / "dup.swf"
    log.write_text("\n".join([*lines, again.replace(" 300 ", " 301 ")]) + "\n")
    report = _report(tmp_path, log)
    assert report["rejected_by_reason"] == {"duplicate_superseded": 1}
    kept = pl.read_parquet(tmp_path / "d.parquet").filter(pl.col("job_id") == "2")
    assert kept["run_time_s"].to_list() == [301]  # the last record is kept, as for sacct


@pytest.mark.parametrize("logs", [("stats_tiny.swf", "stats_tiny.swf"),
                                  ("sacct_quirks.txt", "sacct_quirks.txt")])
def test_the_same_file_twice(tmp_path: Path, logs: tuple[str, str]) -> None:
    once = _report(tmp_path, DATA / logs[0])
    twice = _report(tmp_path, *(DATA / name for name in logs))
    assert twice["jobs_kept"] == once["jobs_kept"]
    assert twice["rejected_by_reason"]["duplicate_superseded"] == (
        once["rejected_by_reason"].get("duplicate_superseded", 0) * 2 + once["jobs_kept"])


def test_swf_and_sacct_with_the_same_job_ids(tmp_path: Path) -> None:
    sacct = tmp_path / "s.txt"
    header = (DATA / "sacct_quirks.txt").read_text().splitlines()[0]
    sacct.write_text(header + "\n" + "".join(
        f"{i}|{i}|x|u|g|a|p|q|2024-03-01T10:00:00||||||COMPLETED|0:0|1|1|1|1|1G|||\n"
        for i in (2, 5, 99)))
    report = _report(tmp_path, TINY, sacct)
    assert report["jobs_kept"] == 9  # 8 SWF jobs + job 99; jobs 2 and 5 once each
    assert report["rejected_by_reason"]["duplicate_superseded"] == 2


QUIRKS_HEADER = (DATA / "sacct_quirks.txt").read_text().splitlines()[0]
ROW = "{id}|{id}|{name}|u|g|a|p|q|2024-03-01T10:00:00|2024-03-01T10:00:00|" \
      "2024-03-01T10:01:00|2024-03-01T10:11:00|00:10:00|01:00:00|COMPLETED|0:0|1|4|4|1|" \
      "4000M|cpu=4|cpu=4|n01"


@pytest.mark.parametrize("style", ["parsable2", "parsable"])
def test_a_pipe_in_the_job_name_is_rejoined(tmp_path: Path, style: str) -> None:
    end = "|" if style == "parsable" else ""
    names = ["plain", "a|b", "x||y|", "|lead", "[b]|\x1b"]
    log = tmp_path / "p.txt"
    log.write_text(QUIRKS_HEADER + end + "\n" + "".join(
        ROW.format(id=100 + i, name=n) + end + "\n" for i, n in enumerate(names)))
    report = _report(tmp_path, log)
    assert report["rows_rejected"] == 0
    assert report["repaired_by_rule"]["sacct_name_rejoined"] == 4
    table = pl.read_parquet(tmp_path / "d.parquet").sort("job_id")
    assert table["job_name"].to_list() == names
    assert table["req_cpus"].to_list() == [4] * 5 and table["run_time_s"].to_list() == [600] * 5


def test_a_pipe_is_ambiguous_with_two_free_text_columns(tmp_path: Path) -> None:
    log = tmp_path / "p.txt"
    log.write_text("JobID|JobName|Submit|State|Comment\n"
                   "1|a|2024-03-01T10:00:00|COMPLETED|c\n"
                   "2|a|b|2024-03-01T10:00:00|COMPLETED|c\n"
                   "3|a|2024-03-01T10:00:00|COMPLETED|c|d\n")
    report = _report(tmp_path, log)
    assert report["rejected_by_reason"] == {"field_count": 2}
    assert report["repaired_by_rule"].get("sacct_name_rejoined", 0) == 0


def test_whatif_terminal_prints_log_names_plainly(capsys: pytest.CaptureFixture[str]) -> None:
    from whatif_fixture import build

    from hpcpolicy.commands.whatif import render_whatif

    doc, _ = build(jobs=120)
    hostile = "user [bold]x[/] \x1b[2J\x07\u202egpj.exe"
    doc["comparisons"][0]["tradeoffs"] = [f"{hostile} waits longer"]
    doc["fidelity"] = {**doc["fidelity"], "available": False, "reason": hostile}
    render_whatif(doc)
    out = capsys.readouterr().out
    shown = "user [bold]x[/] \\u001b[2J\\u0007\\u202egpj.exe"
    assert f"trade-off: {shown} waits longer" in out and f"not available: {shown}" in out
    assert "\x1b" not in out and "\x07" not in out and "\u202e" not in out


def test_alibaba_pending_pods_without_deletion_time(tmp_path: Path) -> None:
    # found by benchmarks/fuzz_readers.py: no elapsed time to take a median of
    lines = [ln for ln in (DATA / "alibaba" / "openb_pod_list_test.csv").read_text()
             .splitlines() if ",Pending," not in ln]
    log = tmp_path / "pods.csv"
    log.write_text("\n".join([*lines, "pod-new,1000,1024,0,0,,BE,Pending,950,,"]) + "\n")
    result = invoke("ingest", str(log), "-o", str(tmp_path / "t.parquet"), "--format",
                    "alibaba", "--max-reject-fraction", "1")
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize("fixture", ["philly_jobs.csv", "helios_cluster_log.csv"])
def test_gpu_csv_row_with_a_quote_and_a_carriage_return(tmp_path: Path, fixture: str) -> None:
    # found by benchmarks/fuzz_readers.py: Python's csv module refuses a bare \r in a field
    lines = (DATA / fixture).read_text().splitlines()
    broken = 'a"' + lines[1].replace(",", ",P\rz,", 1)  # a quote, then \r outside quotes
    log = tmp_path / "t.csv"
    log.write_bytes(("\n".join([*lines, broken]) + "\n").encode())
    result = invoke("ingest", str(log), "-o", str(tmp_path / "t.parquet"),
                    "--format", fixture.split("_")[0], "--max-reject-fraction", "1")
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "t.ingest.json").read_text())
    assert report["rows_read"] == len(lines)  # the header is no row; the broken line is
    assert report["rejected_by_reason"].get("field_count", 0) >= 1
