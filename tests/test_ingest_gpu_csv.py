"""The GPU-trace readers on small hand-written fixtures: Helios, Philly and Alibaba pod
lists with their node list. Expected values come from the fixtures' text, by hand."""

from __future__ import annotations

import gzip
import json
import shutil
import tomllib
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from cli_helpers import invoke, one_line_error
from conftest import DATA

from hpcpolicy.cluster_io import load_cluster
from hpcpolicy.errors import ConfigError, InputFormatError
from hpcpolicy.ingest import IngestConfig, cluster_path, detect_format, ingest, output_paths
from hpcpolicy.ingest.csv_scan import read_header, scan_csv
from hpcpolicy.ingest.gpu.layouts import HELIOS

HELIOS_LOG = DATA / "helios_cluster_log.csv"
PHILLY_LOG = DATA / "philly_jobs.csv"
PODS = DATA / "alibaba" / "openb_pod_list_test.csv"
NODES = DATA / "alibaba" / "openb_node_list_all_node.csv"


def _ingest(path: Path, tmp: Path, **cfg: Any) -> tuple[pl.DataFrame, pl.DataFrame, Any]:
    out = tmp / "jobs.parquet"
    report = ingest([path], out, IngestConfig(overwrite=True, **cfg))
    paths = output_paths(out)
    return pl.read_parquet(paths["jobs"]), pl.read_parquet(paths["rejects"]), report


def _job(jobs: pl.DataFrame, job_id: str) -> dict[str, Any]:
    return jobs.filter(pl.col("job_id") == job_id).row(0, named=True)


def _utc(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


# --- detection ---------------------------------------------------------------------------

@pytest.mark.parametrize(("path", "fmt"), [(HELIOS_LOG, "helios"), (PHILLY_LOG, "philly"),
                                           (PODS, "alibaba")])
def test_auto_detects_each_gpu_layout(path: Path, fmt: str) -> None:
    assert detect_format(path) == fmt


def test_node_list_given_as_a_log_says_to_use_node_list_option() -> None:
    with pytest.raises(InputFormatError, match=r"node list, not a job log.*--node-list"):
        detect_format(NODES)


def test_unknown_csv_lists_the_formats(tmp_path: Path) -> None:
    odd = tmp_path / "odd.csv"
    odd.write_text("a,b,c\n1,2,3\n")
    with pytest.raises(InputFormatError) as err:
        detect_format(odd)
    for name in ("SWF", "sacct", "Alibaba", "Helios", "Philly", "--format"):
        assert name in str(err.value)


# --- the shared CSV scan -----------------------------------------------------------------

def test_scan_keeps_line_numbers_raw_text_and_flags_broken_lines(tmp_path: Path) -> None:
    log = tmp_path / "log.csv.gz"
    log.write_bytes(gzip.compress(
        b"\xef\xbb\xbfjob_id,state,submit_time\n\n7, COMPLETED ,2020-06-09 18:41:01\r\n"
        b"8,x\n9,\"CANCELLED, by 1\",2020-06-09 18:41:01\n10,\xff,2020-06-09 18:41:01\n"))
    rows = scan_csv(log, read_header(log, HELIOS)).collect()
    assert rows.select("_line", "job_id", "state", "_reason").rows() == [
        (3, "7", "COMPLETED", None), (4, None, None, "field_count"),
        (5, "9", "CANCELLED, by 1", None), (6, None, None, "non_utf8")]
    assert rows["_raw"][1] == "8,x"
    assert rows["user"].null_count() == 4  # an optional column the file lacks


def test_missing_column_is_named_with_the_layout(tmp_path: Path) -> None:
    log = tmp_path / "log.csv"
    log.write_text("job_id,submit_time\n1,2020-06-09 18:41:01\n")
    with pytest.raises(InputFormatError, match=r"line 1: column 'state' missing; the helios "
                       r"format .* needs the columns job_id, submit_time, state"):
        read_header(log, HELIOS)


# --- Helios ------------------------------------------------------------------------------

def test_helios_mapping_states_and_stand_ins(tmp_path: Path) -> None:
    jobs, rejects, report = _ingest(HELIOS_LOG, tmp_path, format="helios")
    assert (report.rows_read, report.jobs_kept, report.rows_rejected) == (13, 8, 5)
    first = _job(jobs, "1001")
    assert (first["job_id_raw"], first["user"], first["partition"], first["job_name"]) == (
        1001, "uAAAA", "vcA1", "train_a")
    assert (first["req_gpus"], first["req_cpus"], first["req_nodes"]) == (8, 48, 1)
    assert first["submit_time"] == _utc("2020-06-01 10:00:00")
    assert (first["run_time_s"], first["wait_time_s"], first["state"]) == (7200, 5, "completed")
    states = dict(jobs.select("job_id", pl.col("state").cast(pl.String)).rows())
    assert states == {"1001": "completed", "1002": "failed", "1003": "cancelled",
                      "1004": "timeout", "1005": "node_fail", "1006": "running",
                      "1007": "completed", "1008": "completed"}
    assert _job(jobs, "1007")["job_name"] == "name, with a comma"  # quoted; Philly's Pass
    no_end = _job(jobs, "1008")  # start from queue, end from duration
    assert (no_end["start_time"], no_end["end_time"]) == (_utc("2020-06-01 10:07:30"),
                                                           _utc("2020-06-01 10:09:00"))
    running = _job(jobs, "1006")
    assert (running["end_time"], running["run_time_s"]) == (None, None)
    zero = _job(jobs, "1005")
    assert (zero["req_cpus"], zero["req_nodes"]) == (None, None)
    assert report.repaired_by_rule == {"gpu_running_at_end": 1, "gpu_zero_request": 1}
    assert dict(rejects.select("line", "reason").rows()) == {
        10: "bad_state", 11: "bad_timestamp", 12: "bad_number", 13: "end_before_start",
        14: "field_count"}
    assert rejects.filter(pl.col("line") == 14)["raw"][0] == "1013,uEEEE,vcA1,short_row,1,6"
    assert any("read as UTC" in n for n in report.notes)


def test_helios_times_are_read_in_the_given_zone(tmp_path: Path) -> None:
    jobs, _, report = _ingest(HELIOS_LOG, tmp_path, tz="Asia/Shanghai")
    assert _job(jobs, "1001")["submit_time"] == _utc("2020-06-01 02:00:00")
    assert not any("read as UTC" in n for n in report.notes)


# --- Philly ------------------------------------------------------------------------------

def test_philly_mapping_running_and_clock_change(tmp_path: Path) -> None:
    jobs, rejects, report = _ingest(PHILLY_LOG, tmp_path, tz="America/Los_Angeles")
    assert (report.rows_read, report.jobs_kept, report.rows_rejected) == (12, 8, 4)
    first = _job(jobs, "application_1506638472019_0001")
    assert (first["user"], first["partition"], first["req_gpus"], first["job_id_raw"]) == (
        "u01", "vc11", 8, None)
    assert first["submit_time"] == _utc("2017-10-07 08:11:39")  # PDT is UTC-7
    assert (first["wait_time_s"], first["run_time_s"]) == (30, 2 * 86400 + 5 * 3600 + 41 * 60 + 3)
    states = [str(s) for s in jobs.sort("job_id")["state"]]
    assert states == ["completed", "cancelled", "failed", "running", "cancelled",
                      "completed", "completed", "failed"]
    never_ran = _job(jobs, "application_1506638472019_0005")
    assert (never_ran["start_time"], never_ran["run_time_s"]) == (None, None)
    ambiguous = _job(jobs, "application_1506638472019_0006")  # 01:30 on 2017-11-05, twice
    assert ambiguous["submit_time"] == _utc("2017-11-05 08:30:00")  # the earlier, PDT
    assert report.repaired_by_rule["gpu_ambiguous_local_time"] == 1
    assert report.repaired_by_rule["gpu_running_at_end"] == 1
    assert sorted(rejects["reason"]) == ["absurd_value", "no_job_id", "no_submit_time",
                                         "start_before_submit"]


# --- Alibaba pod list and node list ------------------------------------------------------

def test_alibaba_pods_mapping_fractions_and_phases(tmp_path: Path) -> None:
    jobs, rejects, report = _ingest(PODS, tmp_path)
    assert (report.rows_read, report.jobs_kept, report.rows_rejected) == (17, 10, 7)
    done = _job(jobs, "pod-ok-done")
    assert done["submit_time"] == _utc("2023-01-01 00:01:40")
    assert (done["wait_time_s"], done["run_time_s"], done["state"]) == (60, 3940, "completed")
    assert (done["req_cpus"], done["req_mem_mib"], done["req_nodes"], done["qos"]) == (
        8, 16384, 1, "LS")
    share = _job(jobs, "pod-ok-running")
    assert (share["req_gpus"], share["req_gpu_milli"], share["req_cpus"]) == (1, 460, 4)
    assert (share["state"], share["end_time"], share["run_time_s"]) == ("running", None, None)
    assert share["start_time"] == _utc("2023-01-01 00:05:10")
    # Deleted while Running before the trace's last moment: it ran until deleted.
    deleted = _job(jobs, "pod-ok-deleted")
    assert (deleted["state"], deleted["run_time_s"]) == ("unknown", 2040)
    pending = _job(jobs, "pod-ok-pending")
    assert (pending["state"], pending["start_time"], pending["wait_time_s"]) == (
        "pending", None, None)
    cpu_only = _job(jobs, "pod-ok-cpu")
    assert (cpu_only["req_gpus"], cpu_only["req_gpu_milli"]) == (0, None)
    assert _job(jobs, "pod-ok-spec")["req_gpu_type"] == "v100m16|v100m32"
    assert _job(jobs, "pod-ok-zerocpu")["req_cpus"] is None
    assert jobs["user"].null_count() == jobs["partition"].null_count() == 10
    assert report.repaired_by_rule == {"gpu_zero_request": 1, "alibaba_cpus_rounded_up": 1}
    assert dict(rejects.select("job_id", "reason").rows()) == {
        "pod-bad-negative": "absurd_value", "pod-bad-ends-early": "end_before_start",
        "pod-bad-share": "bad_gpu_share", "pod-bad-zero-share": "bad_gpu_share",
        "pod-bad-cpu": "bad_number", "pod-bad-early-start": "start_before_submit",
        "pod-bad-phase": "bad_state"}
    notes = " ".join(report.notes)
    assert "1 Running pods deleted before the trace's last deletion time" in notes
    assert "2 Running pods deleted at the trace's last deletion time" in notes
    assert "1 Pending pods" in notes


def test_alibaba_origin_moves_every_time(tmp_path: Path) -> None:
    jobs, _, report = _ingest(PODS, tmp_path, origin="2020-02-29T12:00:00+01:00")
    assert _job(jobs, "pod-ok-done")["submit_time"] == _utc("2020-02-29 11:01:40")
    assert report.inputs[0]["inferred"]["time_origin"]["how"] == "given with --origin"


def test_node_list_beside_the_pods_becomes_the_cluster_spec(tmp_path: Path) -> None:
    _, _, report = _ingest(PODS, tmp_path)
    toml = cluster_path(tmp_path / "jobs.parquet")
    assert report.cluster_spec == str(toml)
    spec = load_cluster(toml)
    assert (spec.total_nodes, spec.total_cores, spec.total_gpus) == (6, 464, 20)
    shapes = {(g.name, g.count, g.gpus, g.gpu_type, g.rack) for g in spec.groups}
    assert shapes == {("cpu-32c-256g", 2, 0, None, None), ("t4x2-104c-512g", 2, 2, "t4", None),
                      ("g2x8-96c-384g", 1, 8, "g2", None),
                      ("v100m32x8-96c-768g", 1, 8, "v100m32", None)}
    text = toml.read_text()
    assert "PLACEHOLDER" in text and str(NODES) in text
    speeds = [g.get("gpu_speed") for g in tomllib.loads(text)["groups"] if g.get("gpus")]
    assert speeds == [1.0] * 3
    stored = json.loads(output_paths(tmp_path / "jobs.parquet")["report"].read_text())
    assert stored["cluster_spec"] == str(toml)
    assert stored["inputs"][0]["inferred"]["node_list"]["how"] == "found beside the pod list"


def test_without_a_node_list_no_spec_is_written_and_the_report_says_so(tmp_path: Path) -> None:
    pods = tmp_path / "pods.csv"
    shutil.copy(PODS, pods)
    _, _, report = _ingest(pods, tmp_path)
    assert report.cluster_spec is None
    assert not cluster_path(tmp_path / "jobs.parquet").exists()
    assert any("no cluster spec written" in n for n in report.notes)
    _, _, again = _ingest(pods, tmp_path, node_list=str(NODES))  # --node-list, and overwrite
    assert load_cluster(again.cluster_spec).total_nodes == 6


def test_stale_cluster_spec_is_removed_on_overwrite(tmp_path: Path) -> None:
    _ingest(PODS, tmp_path)
    _, _, report = _ingest(HELIOS_LOG, tmp_path)
    assert not cluster_path(tmp_path / "jobs.parquet").exists()
    assert any("describe no machine" in n for n in report.notes)


def test_existing_cluster_spec_is_refused_without_overwrite(tmp_path: Path) -> None:
    toml = cluster_path(tmp_path / "jobs.parquet")
    toml.write_text("# mine\n")
    with pytest.raises(ConfigError, match=r"jobs.cluster.toml already exists.*--overwrite"):
        ingest([PODS], tmp_path / "jobs.parquet")
    assert toml.read_text() == "# mine\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["jobs.cluster.toml"]


@pytest.mark.parametrize(("option", "value"), [("origin", "2023-01-01T00:00:00Z"),
                                               ("node_list", str(NODES))])
def test_alibaba_options_with_other_formats_are_refused(tmp_path: Path, option: str,
                                                        value: str) -> None:
    with pytest.raises(ConfigError, match="Alibaba GPU-trace pod lists only"):
        ingest([HELIOS_LOG], tmp_path / "jobs.parquet", IngestConfig(**{option: value}))
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(("line", "message"), [
    ("node-9,32500,1024,0,", "line 8: cpu_milli is not a whole number of CPUs"),
    ("node-9,32000,1024,4,", "line 8: the node has GPUs but column 'model' is empty"),
    ("node-9,32000,lots,0,", "line 8: column 'memory_mib' holds 'lots'"),
    ("node-1,32000,1024,0,", "line 8: node 'node-1' is listed twice, first on line 3"),
    ("node-9,32000", "line 8: the row has a different number of fields"),
])
def test_bad_node_list_is_one_error_naming_the_line(tmp_path: Path, line: str,
                                                    message: str) -> None:
    nodes = tmp_path / "nodes.csv"
    nodes.write_text(NODES.read_text() + line + "\n")
    with pytest.raises(InputFormatError, match=message):
        ingest([PODS], tmp_path / "jobs.parquet", IngestConfig(node_list=str(nodes)))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["nodes.csv"]


# --- through the CLI ---------------------------------------------------------------------

def test_cli_ingests_pods_and_prints_the_cluster_spec(tmp_path: Path) -> None:
    out = tmp_path / "jobs.parquet"
    result = invoke("ingest", str(PODS), "-o", str(out))
    assert result.exit_code == 0, result.output
    output = " ".join(result.output.split())
    for text in ("rows read", "17", "bad_gpu_share", "cluster spec",
                 "node list found beside the pod list", "arbitrary default"):
        assert text in output, text
    assert cluster_path(out).exists()


@pytest.mark.parametrize(("args", "message"), [
    (["--format", "alibaba", str(HELIOS_LOG)], "column 'name' missing; the alibaba format"),
    (["--node-list", "/nonexistent/nodes.csv", str(PODS)], "/nonexistent/nodes.csv: no such file"),
    (["--origin", "last tuesday", str(PODS)], "origin 'last tuesday' is not an ISO 8601 time"),
    (["--origin", "2023-01-01", str(PHILLY_LOG)], "--origin applies to Alibaba GPU-trace"),
])
def test_cli_bad_gpu_input_is_one_clean_line(tmp_path: Path, args: list[str],
                                             message: str) -> None:
    result = invoke("ingest", *args, "-o", str(tmp_path / "jobs.parquet"))
    assert message in one_line_error(result)
    assert list(tmp_path.iterdir()) == []


def test_cli_truncated_gzip_log_is_one_clean_line(tmp_path: Path) -> None:
    lines = HELIOS_LOG.read_text().splitlines()
    body = "".join(f"{i},{lines[1].split(',', 1)[1]}\n" for i in range(20000))
    cut = tmp_path / "cluster_log.csv.gz"
    cut.write_bytes(gzip.compress(f"{lines[0]}\n{body}".encode())[:40000])
    result = invoke("ingest", str(cut), "-o", str(tmp_path / "jobs.parquet"))
    assert "truncated or damaged" in one_line_error(result)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cluster_log.csv.gz"]


def test_cli_format_help_lists_every_format() -> None:
    result = invoke("ingest", "--help")
    assert result.exit_code == 0
    text = " ".join(result.output.split())
    for fmt in ("swf", "sacct", "alibaba", "helios", "philly", "--node-list", "--origin"):
        assert fmt in text, fmt
