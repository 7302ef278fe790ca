"""The sacct reader through the public ``ingest()``: quirks, layouts and the real exports.

``tests/data/sacct_quirks.txt`` is a hand-written ``--parsable2`` export; the expected outcome
of each of its lines is written out below from what the line says, not from a run.
"""

from __future__ import annotations

import csv
import gzip
import json
from pathlib import Path

import polars as pl
import pytest
from conftest import DATA, shared_file
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hpcpolicy.errors import InputFormatError
from hpcpolicy.ingest import IngestConfig, ingest
from hpcpolicy.ingest.sacct.layout import RECOMMENDED_FORMAT

QUIRKS = DATA / "sacct_quirks.txt"
SACCT = IngestConfig(format="sacct")

# line -> reject reason in sacct_quirks.txt (line 1 is the header, line 19 is blank)
QUIRK_REJECTS = {
    13: "duplicate_superseded",  # job 500's REQUEUED record; its last record is line 27
    15: "duplicate_superseded",  # job 600 printed twice: the first copy
    20: "end_before_start",
    21: "absurd_value",  # NCPUS 99999999999
    22: "bad_timestamp",  # Submit 2024-13-45T99:00:00
    26: "orphan_step",  # 900.batch without a job 900
    29: "field_count",  # job name with a line break: its first half ...
    30: "field_count",  # ... and its second half
}
QUIRK_FOLDED = {3, 4, 5, 7, 11, 14, 28}  # .batch, .extern, .0, _3.batch, +0.batch steps
QUIRK_KEPT = ["100", "200_3", "200_[4-9%2]", "300+0", "300+1", "400", "600", "700", "701", "803",
              "804", "805", "500"]
# job 700's name 'pre|post' adds a field: read back where JobName is the only free-text column
# after the job id (sacct_name_rejoined); a CSV row of that many fields is field_count
QUIRK_KEPT_CSV = [j for j in QUIRK_KEPT if j != "700"]
QUIRK_REJECTS_CSV = {**QUIRK_REJECTS, 17: "field_count"}


def _ingest(path: Path, tmp_path: Path, cfg: IngestConfig = SACCT, name: str = "jobs"):
    report = ingest([path], tmp_path / f"{name}.parquet", cfg)
    jobs = pl.read_parquet(tmp_path / f"{name}.parquet")
    rejects = pl.read_parquet(tmp_path / f"{name}.rejects.parquet")
    return report, jobs, rejects


def _job(jobs: pl.DataFrame, job_id: str) -> dict[str, object]:
    (row,) = jobs.filter(pl.col("job_id") == job_id).rows(named=True)
    return row


def test_quirks_every_line_accounted_for(tmp_path: Path) -> None:
    report, jobs, rejects = _ingest(QUIRKS, tmp_path)
    assert report.rows_read == 28  # 30 lines - header - blank line
    assert report.steps_folded == len(QUIRK_FOLDED)
    assert jobs["job_id"].to_list() == QUIRK_KEPT
    assert dict(zip(rejects["line"], rejects["reason"], strict=True)) == QUIRK_REJECTS
    assert report.rows_read == report.jobs_kept + report.rows_rejected + report.steps_folded
    lines = QUIRKS.read_text().split("\n")
    for line, raw in zip(rejects["line"], rejects["raw"], strict=True):
        assert raw == lines[line - 1]  # the exact text, never a re-joined guess


def test_quirks_values(tmp_path: Path) -> None:
    _, jobs, _ = _ingest(QUIRKS, tmp_path)
    j = _job(jobs, "100")
    assert (j["req_cpus"], j["req_nodes"], j["alloc_cpus"], j["alloc_nodes"]) == (8, 2, 8, 2)
    assert (j["run_time_s"], j["wait_time_s"], j["req_walltime_s"]) == (3600, 300, 7200)
    assert j["req_mem_mib"] == 32000  # ReqTRES mem=32000M (ReqMem 4000Mc x 8 CPUs agrees)
    assert (j["state"], j["exit_code"], j["node_list"], j["user"]) == (
        "completed", 0, "n[01-02]", "alice")
    a = _job(jobs, "200_3")
    assert (a["array_job_id"], a["array_task_id"], a["job_id_raw"]) == (200, 3, 201)
    assert (a["req_gpus"], a["req_gpu_type"], a["alloc_gpus"]) == (2, "a100", 2)
    assert (a["req_mem_mib"], a["state"]) == (64 * 1024, "timeout")
    g = _job(jobs, "200_[4-9%2]")
    assert (g["array_job_id"], g["array_task_id"], g["job_id_raw"], g["state"]) == (
        200, None, 200, "pending")
    assert (g["start_time"], g["alloc_cpus"], g["node_list"], g["req_mem_mib"]) == (
        None, None, None, 1536)
    assert g["req_walltime_s"] == 86400
    for comp, raw, cpus in (("300+0", 300, 2), ("300+1", 301, 6)):
        h = _job(jobs, comp)
        assert (h["het_job_id"], h["het_job_offset"], h["job_id_raw"], h["alloc_cpus"]) == (
            300, int(comp[-1]), raw, cpus)
    c = _job(jobs, "400")  # CANCELLED by 1234 before it started
    assert (c["state"], c["start_time"], c["run_time_s"], c["alloc_cpus"], c["exit_code"]) == (
        "cancelled", None, None, None, None)
    r = _job(jobs, "500")  # the last of two records wins
    assert (r["state"], r["run_time_s"], r["wait_time_s"]) == ("completed", 540, 60)
    assert _job(jobs, "701")["job_name"] == 'say "hi", then go'
    assert _job(jobs, "701")["state"] == "oom"
    assert (_job(jobs, "803")["req_walltime_s"], _job(jobs, "803")["state"]) == (None,
                                                                                  "node_fail")
    p = _job(jobs, "804")  # Partition_Limit; ReqMem 4000M new style; no TRES lists
    assert (p["req_walltime_s"], p["req_mem_mib"], p["req_gpus"], p["state"]) == (
        None, 4000, None, "preempted")
    w = _job(jobs, "805")  # 0n: all of each node's memory; still running
    assert (w["req_mem_mib"], w["state"], w["end_time"], w["run_time_s"]) == (
        None, "running", None, None)


def test_quirks_repairs_counted(tmp_path: Path) -> None:
    report, _, _ = _ingest(QUIRKS, tmp_path)
    assert {k: v for k, v in report.repaired_by_rule.items() if v} == {
        "sacct_array_grouped": 1, "sacct_walltime_unset": 2, "sacct_mem_whole_node": 1,
        "sacct_name_rejoined": 1}
    stored = json.loads((tmp_path / "jobs.ingest.json").read_text())
    assert stored["inputs"][0]["header"]["style"] == "parsable2"


def test_auto_detection_and_gzip(tmp_path: Path) -> None:
    gz = tmp_path / "quirks.txt.gz"
    gz.write_bytes(gzip.compress(QUIRKS.read_bytes()))
    report, jobs, _ = _ingest(gz, tmp_path, IngestConfig())
    assert report.inputs[0]["format"] == "sacct"
    assert jobs["job_id"].to_list() == QUIRK_KEPT


def _rewrite(tmp_path: Path, name: str, transform) -> Path:
    """A copy of the quirks export with each line's fields passed through ``transform``."""
    out = tmp_path / name
    lines = QUIRKS.read_text().split("\n")[:-1]
    out.write_text("".join(f"{transform(ln)}\n" if ln else "\n" for ln in lines))
    return out


def _same_jobs(tmp_path: Path, path: Path, cfg: IngestConfig = SACCT,
               drop: tuple[str, ...] = ()) -> pl.DataFrame:
    _, base, _ = _ingest(QUIRKS, tmp_path, cfg, "base")
    _, other, _ = _ingest(path, tmp_path, cfg, "other")
    assert other.equals(base.filter(~pl.col("job_id").is_in(drop)))
    return other


def test_parsable_with_trailing_pipe(tmp_path: Path) -> None:
    path = _rewrite(tmp_path, "p1.txt", lambda ln: ln + "|")
    _same_jobs(tmp_path, path)


def test_columns_in_any_order(tmp_path: Path) -> None:
    n = len(QUIRKS.read_text().split("\n")[0].split("|"))
    order = list(reversed(range(n)))

    def shuffle(line: str) -> str:
        fields = line.split("|")
        return "|".join(fields[i] for i in order) if len(fields) == n else line

    # JobName now comes before JobID: job 700's 'pre|post' can no longer be read back
    _same_jobs(tmp_path, _rewrite(tmp_path, "rev.txt", shuffle), drop=("700",))


def test_csv_export_with_quotes(tmp_path: Path) -> None:
    out = tmp_path / "quirks.csv"
    with out.open("w", newline="") as f:
        writer = csv.writer(f, lineterminator="\n")
        for line in QUIRKS.read_text().split("\n")[:-1]:
            if line:
                writer.writerow(line.split("|"))
    text = out.read_text()
    assert '"say ""hi"", then go"' in text and '"billing=8,cpu=8' in text
    report, jobs, rejects = _ingest(out, tmp_path, IngestConfig(), "csv")
    assert report.inputs[0]["header"]["style"] == "csv"
    assert jobs["job_id"].to_list() == QUIRK_KEPT_CSV
    assert _job(jobs, "701")["job_name"] == 'say "hi", then go'
    assert sorted(rejects["reason"].to_list()) == sorted(QUIRK_REJECTS_CSV.values())


def test_csv_broken_quoting_is_a_field_count_reject(tmp_path: Path) -> None:
    head = "JobID,Submit,State,JobName"
    path = tmp_path / "q.csv"
    path.write_text(f'{head}\n1,2024-03-01T10:00:00,COMPLETED,"ok"\n'
                    f'2,2024-03-01T10:00:00,COMPLETED,"unterminated\n'
                    f'3,2024-03-01T10:00:00,COMPLETED,x"y\n')
    _, jobs, rejects = _ingest(path, tmp_path, IngestConfig(max_reject_fraction=1.0))
    assert jobs["job_id"].to_list() == ["1"]
    assert rejects["reason"].to_list() == ["field_count", "field_count"]


def test_subset_of_columns(tmp_path: Path) -> None:
    path = tmp_path / "few.txt"
    path.write_text("JobID|State|Submit\n7|COMPLETED|2024-03-01T10:00:00\n7.batch|COMPLETED|"
                    "2024-03-01T10:00:00\n")
    report, jobs, _ = _ingest(path, tmp_path)
    assert (report.rows_read, report.jobs_kept, report.steps_folded) == (2, 1, 1)
    j = jobs.row(0, named=True)
    assert (j["job_id"], j["job_id_raw"], j["state"], j["req_cpus"], j["run_time_s"]) == (
        "7", 7, "completed", None, None)


def test_missing_required_column_names_it_and_the_command(tmp_path: Path) -> None:
    path = tmp_path / "nosubmit.txt"
    path.write_text("JobID|State|Start\n7|COMPLETED|2024-03-01T10:00:00\n")
    with pytest.raises(InputFormatError) as err:
        ingest([path], tmp_path / "jobs.parquet", SACCT)
    msg = str(err.value)
    assert "column Submit missing" in msg and f"--format={RECOMMENDED_FORMAT}" in msg
    assert "\n" not in msg
    assert not (tmp_path / "jobs.parquet").exists()


def test_header_less_export_is_refused_with_the_fix(tmp_path: Path) -> None:
    path = tmp_path / "noheader.txt"
    path.write_text("".join(ln + "\n" for ln in QUIRKS.read_text().split("\n")[1:5]))
    with pytest.raises(InputFormatError, match=r":1: no header line .*--sacct-columns"):
        ingest([path], tmp_path / "jobs.parquet", SACCT)


def test_wrong_separator(tmp_path: Path) -> None:
    path = _rewrite(tmp_path, "semi.txt", lambda ln: ln.replace("|", ";"))
    with pytest.raises(InputFormatError, match=r"semi.txt:1: the header is separated by ';'"):
        ingest([path], tmp_path / "jobs.parquet", IngestConfig())


def test_time_zone_converts_to_utc(tmp_path: Path) -> None:
    path = tmp_path / "tz.txt"
    path.write_text("JobID|Submit|Start|End|State\n"
                    "1|2024-01-15T12:00:00|2024-01-15T12:00:10|2024-01-15T13:00:10|COMPLETED\n"
                    "2|2024-10-27T02:30:00|2024-10-27T02:30:00|2024-10-27T04:00:00|COMPLETED\n")
    report, jobs, _ = _ingest(path, tmp_path, IngestConfig(format="sacct", tz="Europe/Stockholm"))
    utc = jobs.select(pl.col("submit_time", "end_time").dt.strftime("%Y-%m-%dT%H:%M:%S")).rows()
    # Stockholm is UTC+1 in January; 2024-10-27 02:30 happens twice, read as the first (UTC+2)
    assert utc == [("2024-01-15T11:00:00", "2024-01-15T12:00:10"),
                   ("2024-10-27T00:30:00", "2024-10-27T03:00:00")]
    assert jobs["run_time_s"].to_list() == [3600, 9000]  # 02:30 CEST -> 04:00 CET is 2.5 h
    assert report.repaired_by_rule["sacct_ambiguous_local_time"] == 1


def test_non_utf8_row_is_rejected_with_its_text(tmp_path: Path) -> None:
    path = tmp_path / "latin1.txt"
    path.write_bytes(b"JobID|Submit|State|JobName\n1|2024-03-01T10:00:00|COMPLETED|ok\n"
                     b"2|2024-03-01T10:00:00|COMPLETED|caf\xe9\n")
    _, jobs, rejects = _ingest(path, tmp_path)
    assert jobs["job_id"].to_list() == ["1"]
    assert rejects.select("line", "reason").rows() == [(3, "non_utf8")]
    assert rejects["raw"][0] == "2|2024-03-01T10:00:00|COMPLETED|caf\ufffd"


def test_truncated_gzip_is_one_line_error(tmp_path: Path) -> None:
    big = "\n".join(QUIRKS.read_text().split("\n")[:2] * 1) + "\n"
    body = big + "".join(f"{i}|{i}|x|u|g|a|p|q|2024-03-01T10:00:00||||||COMPLETED|0:0|1|1|1|1|"
                         f"1G|||\n" for i in range(1000, 40000))
    data = gzip.compress(body.encode())
    path = tmp_path / "cut.txt.gz"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(InputFormatError, match="truncated or damaged") as err:
        ingest([path], tmp_path / "jobs.parquet", SACCT)
    assert "\n" not in str(err.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cut.txt.gz"]


def test_repeated_header_of_concatenated_exports_is_not_a_row(tmp_path: Path) -> None:
    text = QUIRKS.read_text().split("\n")
    path = tmp_path / "twice.txt"
    path.write_text("\n".join([*text[:3], text[0], "1000|1000|x|u|g|a|p|q|2024-03-01T10:00:00|"
                               "|||||COMPLETED|0:0|1|1|1|1|1G|||"]) + "\n")
    report, _, _ = _ingest(path, tmp_path)
    assert (report.rows_read, report.jobs_kept, report.steps_folded) == (3, 2, 1)


def test_kabre_export_without_job_ids_or_start(tmp_path: Path) -> None:
    path = shared_file("kabre-2024-sacct.csv")
    report, jobs, _ = _ingest(path, tmp_path, IngestConfig())
    assert (report.rows_read, report.jobs_kept, report.rows_rejected) == (30376, 30376, 0)
    assert jobs["job_id"][0] == "line:2" and jobs["start_time"].null_count() == jobs.height
    notes = " ".join(report.notes)
    assert "no JobID" in notes and "641 rows are exact copies" in notes
    assert "start_time and end_time cannot be derived" in notes
    repaired = report.repaired_by_rule
    assert repaired["sacct_wait_time_estimated"] == 30376
    assert repaired["sacct_run_time_estimated"] + repaired["sacct_run_time_over_limit"] == 30376
    assert repaired["sacct_walltime_unset"] == 86  # the 86 Partition_Limit rows
    # line 2: 1 CPU, 100Mc, CPUTimeRAW 158517504 > 7-04:00:00 limit, TIMEOUT -> the limit
    first = jobs.row(0, named=True)
    assert (first["req_mem_mib"], first["req_walltime_s"], first["run_time_s"]) == (
        100, 619200, 619200)
    assert first["wait_time_s"] == 1  # ResvCPURAW 1 / 1 CPU
    assert jobs["state"].value_counts().sort("state")["count"].sum() == 30376


def test_genomique_format_all_one_job_two_steps(tmp_path: Path) -> None:
    path = shared_file("genomique-2026-sacct-format-all.csv")
    report, jobs, _ = _ingest(path, tmp_path, IngestConfig())
    assert (report.rows_read, report.jobs_kept, report.steps_folded, report.rows_rejected) == (
        3, 1, 2, 0)
    # 109 columns and, despite its description, no trailing '|' (the file was checked)
    assert report.inputs[0]["header"]["style"] == "parsable2"
    assert len(report.inputs[0]["header"]["columns"]) == 109
    j = jobs.row(0, named=True)
    assert (j["job_id"], j["user"], j["partition"], j["run_time_s"], j["req_mem_mib"]) == (
        "33979", "hermes", "GENOMIQUE-CPU", 778, 1000)  # 19:33:36 -> 19:46:34


# --- property: whatever the lines, every row is counted exactly once -------------------------

_HEADER = b"JobID|JobIDRaw|JobName|Submit|Start|End|State|NCPUS|ReqMem|Timelimit"
_GOOD = "{id}|{id}|{name}|2024-03-01T10:00:00|2024-03-01T10:01:00|2024-03-01T10:02:00|" \
        "COMPLETED|4|4000Mc|01:00:00"
_field = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\n\r"),
                 max_size=12)
_line = st.one_of(
    st.builds(lambda i, n: _GOOD.format(id=i, name=n), st.integers(1, 50),
              st.text(alphabet="abc |\"',", max_size=6)),
    st.builds(lambda i, s: f"{i}.{s}|{i}.{s}|batch||||COMPLETED|4||", st.integers(1, 50),
              st.sampled_from(["batch", "extern", "0"])),
    st.lists(_field, min_size=1, max_size=14).map("|".join),
    st.sampled_from(["", "   ", "|||", "1|1|x|2024-03-01T10:00:00"]),
).map(lambda s: s.encode()) | st.binary(max_size=40).map(
    lambda b: b.replace(b"\n", b"").replace(b"\r", b""))


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=st.lists(_line, min_size=1, max_size=15))
def test_property_rows_read_equal_kept_rejected_folded(tmp_path: Path, lines: list[bytes]) -> None:
    path = tmp_path / "p.txt"
    path.write_bytes(_HEADER + b"\n" + b"\n".join(lines) + b"\n")
    expected_rows = sum(1 for ln in lines if ln)  # empty lines are not rows
    cfg = IngestConfig(format="sacct", max_reject_fraction=1.0, overwrite=True)
    try:
        report = ingest([path], tmp_path / "jobs.parquet", cfg)
    except InputFormatError as exc:  # only when no row at all is left
        assert expected_rows == 0 and "no job rows" in str(exc)
        return
    assert report.rows_read == expected_rows
    assert report.rows_read == report.jobs_kept + report.rows_rejected + report.steps_folded
    rejects = pl.read_parquet(tmp_path / "jobs.rejects.parquet")
    text_lines = path.read_bytes().split(b"\n")
    for n, raw in rejects.select("line", "raw").iter_rows():  # bad bytes shown as U+FFFD
        assert raw == text_lines[n - 1].decode("utf-8", errors="replace")


def test_header_less_export_with_its_column_list(tmp_path: Path) -> None:
    """Header-less exports are read with the column list of their --format."""
    from hpcpolicy.ingest.sacct.reader import plan_sacct

    lines = QUIRKS.read_text().split("\n")
    path = tmp_path / "noheader.txt"
    path.write_text("\n".join(lines[1:]))
    cfg = IngestConfig(format="sacct", sacct_columns=tuple(lines[0].split("|")))
    plan = plan_sacct(path, cfg)
    plan.frame.collect()
    assert plan.after_pass is not None
    second = plan.after_pass(28).rerun  # the first pass finds the superseded and orphan lines
    assert second is not None
    frame = second.frame.collect()
    kept = frame.filter(pl.col("_reason").is_null())["job_id"].to_list()
    assert kept == QUIRK_KEPT and plan.header["header"] is False
    assert frame.filter(pl.col("_reason") == "field_count")["_line"].to_list() == [28, 29]


EXPORT_PREFIX = "sacct --allusers --duplicates --parsable2 -S YYYY-MM-DD -E YYYY-MM-DD --format="


@pytest.mark.parametrize(("name", "text"), [
    ("nosubmit.txt", "JobID|State|Start\n7|COMPLETED|2024-03-01T10:00:00\n"),
    ("semi.txt", "JobID;Submit;State\n7;2024-03-01T10:00:00;COMPLETED\n"),
    ("plain.txt", "hello world\n"),
])
def test_export_advice_is_the_whole_command(tmp_path: Path, name: str, text: str) -> None:
    """Taken literally, ``sacct`` without -a/-S/-E exports only the caller's jobs of today
    (issue 41): every suggested export names all users, every record and the period."""
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(InputFormatError) as err:
        ingest([path], tmp_path / "jobs.parquet", SACCT)
    assert f"`{EXPORT_PREFIX}{RECOMMENDED_FORMAT}`" in str(err.value)


def test_unknown_format_advice_is_the_whole_command(tmp_path: Path) -> None:
    path = tmp_path / "what.txt"
    path.write_text("hello world\n")
    with pytest.raises(InputFormatError) as err:
        ingest([path], tmp_path / "jobs.parquet", IngestConfig())
    assert f"`{EXPORT_PREFIX}...`" in str(err.value)
