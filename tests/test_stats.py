"""The workload profile (``hpcpolicy stats``) on small hand-built job tables.

Expected figures are worked out by hand in the comments (or with numpy for percentiles), not
copied from the code's output.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
from typer.testing import CliRunner

from benchmarks.builders.job_tables import T0, job_table, write_job_table
from hpcpolicy.commands import app
from hpcpolicy.errors import ConfigError, InputFormatError, SchemaValidationError
from hpcpolicy.schema import SCHEMA_VERSION
from hpcpolicy.stats import PERCENTILES, profile, save_profile
from hpcpolicy.table import open_job_table

MON = 2 * 86400 + 12 * 3600  # T0 is Fri 2024-03-01 12:00 UTC; this is Mon 03-04 00:00 UTC
H, D = 3600, 86400


def make_table(path: Path, rows: list[dict[str, Any]],
               header: dict[str, Any] | None = None) -> Path:
    """``rows`` (``submit`` in seconds after T0) as ingest would write them, with ``header``."""
    return write_job_table(path, job_table(rows), header=[header or {}])


def _t(seconds: int) -> datetime:
    return datetime.fromtimestamp(T0.timestamp() + seconds, UTC)


# Five jobs, submitted Mon .. Fri. Sizes are allocated where > 0, else requested.
JOBS: list[dict[str, Any]] = [
    # A: alice, Mon 00:00 UTC, 4 of 6 cpus, 1 h run of 2 h requested, 1 GPU (type unknown)
    dict(job_id="A", user="alice", submit=MON, wait=60, end_time=_t(MON + 60 + H),
         req_cpus=6, alloc_cpus=4, run_time_s=3600, req_walltime_s=7200, req_gpus=1,
         alloc_gpus=1),
    # B: alice, Mon 10:30, 8 cpus requested (allocation unknown), ran exactly its limit
    dict(job_id="B", user="alice", submit=MON + 10 * H + 1800, wait=0,
         end_time=_t(MON + 10 * H + 2400), req_cpus=8, run_time_s=600, req_walltime_s=600,
         state="failed"),
    # C: bob, Tue 10:45, allocated 0 so size = 2 requested; ran past its limit (50 s)
    dict(job_id="C", user="bob", submit=MON + D + 10 * H + 2700, req_cpus=2, alloc_cpus=0,
         run_time_s=100, req_walltime_s=50),
    # D: carol, Wed 23:00 UTC (Thu 00:00 in Stockholm), 16 cpus, never ran (run unknown)
    dict(job_id="D", user="carol", submit=MON + 2 * D + 23 * H, req_cpus=16,
         req_walltime_s=3600, state="cancelled"),
    # E: no user, Fri 12:00, 1 cpu, zero run time, 2 a100 GPUs
    dict(job_id="E", submit=MON + 4 * D + 12 * H, req_cpus=1, run_time_s=0, req_walltime_s=60,
         req_gpus=2, alloc_gpus=2, req_gpu_type="a100", state="cancelled"),
]
SPAN_S = 4 * D + 12 * H  # Mon 00:00 .. Fri 12:00
CORE_S = 4 * 3600 + 8 * 600 + 2 * 100 + 1 * 0  # D has no run time


@pytest.fixture
def table(tmp_path: Path) -> Path:
    return make_table(tmp_path / "jobs.parquet", JOBS,
                      {"MaxProcs": 2, "TimeZoneString": "Europe/Stockholm"})


def _close(actual: float | None, expected: float) -> bool:
    return actual is not None and abs(actual - expected) <= 1e-5 * max(1.0, abs(expected))


def test_overview_states_and_span(table: Path) -> None:
    p = profile(table)
    assert (p["file"], p["schema_version"]) == (str(table), SCHEMA_VERSION)
    assert (p["jobs"], p["users"], p["partitions"]) == (5, 3, None)
    assert p["time_span"] == {
        "first_submit": "2024-03-04T00:00:00+00:00", "last_submit": "2024-03-08T12:00:00+00:00",
        "last_end": "2024-03-04T10:40:00+00:00", "arrival_span_s": SPAN_S, "days": 4.5,
    }
    assert list(p["states"].items()) == [("completed", 2), ("failed", 1), ("cancelled", 2)]


def test_distributions_match_numpy_percentiles(table: Path) -> None:
    p = profile(table)
    cases: dict[tuple[str, ...], list[float]] = {
        ("size", "cpus"): [4, 8, 2, 16, 1],
        ("size", "gpus"): [1, 2],
        ("run_time_s",): [3600, 600, 100, 0],
        ("wait_time_s",): [60, 0],
        ("req_walltime_s",): [7200, 600, 50, 3600, 60],
        ("over_request", "factor"): [2.0, 1.0, 0.5],  # A, B, C (E ran 0 s, D unknown)
    }
    for keys, values in cases.items():
        dist = p
        for key in keys:
            dist = dist[key]
        expected = np.percentile(values, [q * 100 for q in PERCENTILES])
        assert dist["known"] == len(values), keys
        assert (dist["min"], dist["max"]) == (min(values), max(values)), keys
        assert _close(dist["mean"], sum(values) / len(values)), keys
        for q, e in zip(PERCENTILES, expected, strict=True):
            assert _close(dist[f"p{round(q * 100)}"], float(e)), (keys, q)
    assert p["size"]["nodes"] == {"known": 0, **{k: None for k in p["size"]["nodes"]
                                                 if k != "known"}}


def test_over_request_shares(table: Path) -> None:
    over = profile(table)["over_request"]
    assert over["jobs_with_both"] == 3
    assert _close(over["share_ran_past_limit"], 1 / 3)  # C
    assert _close(over["share_requested_2x_or_more"], 1 / 3)  # A


def test_load_against_header_machine_size(table: Path) -> None:
    load = profile(table)["load"]
    assert load["jobs_with_size_and_runtime"] == 4
    assert load["core_hours"] == round(CORE_S / 3600, 2)
    assert _close(load["mean_cores_demanded"], CORE_S / SPAN_S)
    assert (load["machine_procs"], load["machine_source"]) == (2, "log header")
    assert _close(load["offered_load"], CORE_S / SPAN_S / 2)


def test_machine_from_option_cluster_file_header_or_unknown(tmp_path: Path) -> None:
    texty = make_table(tmp_path / "a.parquet", JOBS,
                       {"MaxProcs": "338 (batch partition; 512 total)"})
    assert profile(texty)["load"]["machine_procs"] == 338
    load = profile(texty, procs=1000)["load"]
    assert (load["machine_procs"], load["machine_source"]) == (1000, "--procs")
    assert _close(load["offered_load"], CORE_S / SPAN_S / 1000)
    spec = tmp_path / "gpus.toml"
    spec.write_text('name = "g"\n[[groups]]\nname = "a100"\ncount = 2\ncores = 32\n'
                    'gpus = 4\ngpu_type = "a100"\n')
    p = profile(texty, cluster=spec)
    assert (p["load"]["machine_procs"], p["load"]["machine_source"]) == (64, str(spec))
    gpu_s = 1 * 3600 + 2 * 0  # A: 1 GPU for 1 h; E: 2 GPUs for 0 s
    assert p["gpu"]["machine_gpus"] == 8
    assert _close(p["gpu"]["offered_load"], gpu_s / SPAN_S / 8)
    with pytest.raises(ConfigError, match="give only one"):
        profile(texty, procs=4, cluster=spec)
    nodes_only = make_table(tmp_path / "b.parquet", JOBS, {"MaxNodes": 256})
    load = profile(nodes_only)["load"]
    assert load["machine_procs"] == 256 and "one processor per node" in load["machine_source"]
    unknown = make_table(tmp_path / "c.parquet", JOBS, {"Computer": "IBM SP2"})
    p = profile(unknown)
    assert p["load"]["machine_procs"] is None and p["load"]["offered_load"] is None
    assert "--procs" in p["load"]["machine_source"]
    assert p["gpu"]["machine_gpus"] is None and p["gpu"]["offered_load"] is None
    with pytest.raises(ConfigError, match="positive"):
        profile(unknown, procs=0)


def test_arrivals_in_the_logs_zone_or_the_given_one(table: Path) -> None:
    local = profile(table)["arrivals"]
    assert local["time_zone"] == "Europe/Stockholm"  # UTC+1 in early March
    hours = [0] * 24
    for h in (1, 11, 11, 0, 13):
        hours[h] += 1
    assert local["by_hour"] == hours
    assert local["by_weekday"] == {"Mon": 2, "Tue": 1, "Wed": 0, "Thu": 1, "Fri": 1, "Sat": 0,
                                   "Sun": 0}
    assert _close(local["jobs_per_day_mean"], 5 / 4.5)
    utc = profile(table, tz="UTC")["arrivals"]
    hours = [0] * 24
    for h in (0, 10, 10, 23, 12):
        hours[h] += 1
    assert utc["by_hour"] == hours
    assert utc["by_weekday"]["Wed"] == 1 and utc["by_weekday"]["Thu"] == 0
    with pytest.raises(ConfigError, match="Mars/Olympus"):
        profile(table, tz="Mars/Olympus")


def test_arrivals_fall_back_to_the_ingest_time_zone(tmp_path: Path) -> None:
    sacct_like = tmp_path / "sacct.parquet"
    job_table(JOBS).write_parquet(sacct_like, metadata={
        "hpcpolicy.schema_version": SCHEMA_VERSION, "hpcpolicy.tz": "America/Costa_Rica"})
    arrivals = profile(sacct_like)["arrivals"]
    assert arrivals["time_zone"] == "America/Costa_Rica"  # UTC-6, no daylight saving
    assert arrivals["by_hour"][18] == 1 and arrivals["by_weekday"]["Sun"] == 1  # A: Mon 00:00Z
    unstated = make_table(tmp_path / "plain.parquet", JOBS)
    assert profile(unstated)["arrivals"]["time_zone"] == "UTC"


def test_top_users_by_core_hours(table: Path) -> None:
    top = profile(table)["top_users"]
    assert [(u["user"], u["jobs"]) for u in top] == [
        ("alice", 2), ("bob", 1), ("carol", 1), (None, 1)]
    assert top[0]["core_hours"] == round((4 * 3600 + 8 * 600) / 3600, 2)
    assert _close(top[0]["share_core_hours"], (4 * 3600 + 8 * 600) / CORE_S)
    assert top[2]["core_hours"] == 0
    assert [u["user"] for u in profile(table, top_users=1)["top_users"]] == ["alice"]


def test_gpu_share(table: Path, tmp_path: Path) -> None:
    gpu = profile(table)["gpu"]
    assert gpu == {"jobs": 2, "share_jobs": 0.4, "gpu_hours": 1.0,
                   "by_type": {"a100": 1, "unspecified": 1}, "machine_gpus": None,
                   "offered_load": None}
    no_gpus = make_table(tmp_path / "cpu.parquet", JOBS[1:4])
    assert profile(no_gpus)["gpu"] is None


def test_profile_is_deterministic_and_saved_in_key_order(table: Path, tmp_path: Path) -> None:
    first, second = profile(table), profile(table)
    assert first == second
    a = save_profile(first, tmp_path / "a.json").read_bytes()
    b = save_profile(second, tmp_path / "b.json").read_bytes()
    assert a == b
    assert list(json.loads(a)) == list(first) == [
        "file", "schema_version", "source_format", "jobs", "users", "partitions", "time_span",
        "states", "size", "run_time_s", "req_walltime_s", "wait_time_s", "over_request",
        "arrivals", "load", "top_users", "gpu"]


def test_empty_table(tmp_path: Path) -> None:
    p = profile(make_table(tmp_path / "empty.parquet", []))
    assert (p["jobs"], p["users"], p["states"], p["top_users"], p["gpu"]) == (0, None, {}, [],
                                                                              None)
    assert p["run_time_s"]["known"] == 0 and p["load"]["offered_load"] is None
    shown = CliRunner().invoke(app, ["stats", str(tmp_path / "empty.parquet")])
    assert shown.exit_code == 0 and "jobs" in shown.stdout, shown.output


def test_not_a_job_table_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(InputFormatError, match=r"no such file.*hpcpolicy ingest"):
        open_job_table(tmp_path / "absent.parquet")
    with pytest.raises(InputFormatError, match="is a folder"):
        open_job_table(tmp_path)
    text = tmp_path / "log.parquet"
    text.write_text("1 0 10 3600 4\n")
    with pytest.raises(SchemaValidationError, match=r"log\.parquet: not a Parquet file"):
        open_job_table(text)
    plain = tmp_path / "plain.parquet"
    pl.DataFrame({"a": [1]}).write_parquet(plain)
    with pytest.raises(SchemaValidationError, match="not an hpcpolicy job table"):
        open_job_table(plain)


def test_other_major_schema_version_is_refused(tmp_path: Path) -> None:
    newer = tmp_path / "v2.parquet"
    job_table(JOBS).write_parquet(newer, metadata={"hpcpolicy.schema_version": "2.0"})
    with pytest.raises(SchemaValidationError, match=r"schema 2\.0.*reads schema 1\.x.*re-ingest"):
        open_job_table(newer)
    minor = tmp_path / "v1.parquet"
    job_table(JOBS).write_parquet(minor, metadata={"hpcpolicy.schema_version": "1.7",
                                                   "hpcpolicy.source_format": "sacct"})
    assert open_job_table(minor).metadata["schema_version"] == "1.7"
    assert profile(minor)["source_format"] == "sacct"


def test_a_1_0_table_reads_the_columns_added_since_as_null(tmp_path: Path) -> None:
    old = tmp_path / "v1_0.parquet"
    job_table(JOBS).drop("req_gpu_milli").write_parquet(
        old, metadata={"hpcpolicy.schema_version": "1.0"})
    frame = open_job_table(old).frame.collect()
    assert frame["req_gpu_milli"].null_count() == frame.height
    # A table that claims 1.1 must have the column.
    job_table(JOBS).drop("req_gpu_milli").write_parquet(
        old, metadata={"hpcpolicy.schema_version": "1.1"})
    with pytest.raises(SchemaValidationError, match="req_gpu_milli"):
        open_job_table(old)


def test_missing_or_mistyped_columns_are_named(tmp_path: Path) -> None:
    meta = {"hpcpolicy.schema_version": SCHEMA_VERSION}
    broken = tmp_path / "broken.parquet"
    job_table(JOBS).drop("run_time_s").with_columns(pl.col("req_cpus").cast(pl.Float64)).write_parquet(
        broken, metadata=meta)
    with pytest.raises(SchemaValidationError,
                       match=r"req_cpus \(Float64, expected Int32\).*run_time_s \(missing\)"):
        open_job_table(broken)


def test_stats_command_renders_and_writes_json(table: Path, tmp_path: Path) -> None:
    out = tmp_path / "stats.json"
    result = CliRunner().invoke(app, ["stats", str(table), "--json", str(out), "--procs", "4"])
    assert result.exit_code == 0, result.output
    for text in ("workload profile", "alice", "offered load", "requested / run", "a100",
                 "Europe/Stockholm"):
        assert text in result.stdout, text
    assert json.loads(out.read_text()) == profile(table, procs=4)
    quiet = CliRunner().invoke(app, ["--quiet", "stats", str(table), "--json", str(out)])
    assert quiet.exit_code == 0 and quiet.stdout.strip() == str(out)


def test_untrusted_names_are_printed_as_text(tmp_path: Path) -> None:
    odd = [dict(JOBS[0], user="[bold red]mallory[/]")]
    path = make_table(tmp_path / "odd.parquet", odd)
    result = CliRunner().invoke(app, ["stats", str(path)])
    assert result.exit_code == 0, result.output
    assert "[bold red]mallory[/]" in result.stdout


ESCAPES = ("\x1b[31mred", "\x1b]0;owned\x07", "\x1b[2J\x1b[H", "\x9b31m", "a\rb")
"""Colour, window title (OSC), clear screen, an 8-bit CSI and a carriage return."""


def test_terminal_escapes_from_the_log_are_shown_escaped(tmp_path: Path) -> None:
    odd = [dict(JOBS[0], user=name, req_gpus=1, req_gpu_type=f"[dim]{name}")
           for name in ESCAPES]
    path = make_table(tmp_path / "esc.parquet", odd)
    result = CliRunner().invoke(app, ["stats", str(path)])
    assert result.exit_code == 0, result.output
    for raw in ("\x1b", "\x07", "\x9b", "\r"):
        assert raw not in result.stdout, repr(raw)
    assert "\\u001b[31mred" in result.stdout and "\\u001b]0;owned\\u0007" in result.stdout
    assert "[dim]\\u001b[2J" in result.stdout  # markup shown as text, escapes escaped


def test_profile_of_a_real_log_agrees_with_a_plain_python_reading(
    tmp_path: Path, shared: Any
) -> None:
    """KTH SP2: the profile's load, sizes and arrival cycle, recomputed from the raw SWF."""
    import gzip
    from zoneinfo import ZoneInfo

    from hpcpolicy.ingest import ingest

    log = shared("KTH-SP2-1996-2.1-cln.swf.gz")
    report = ingest([log], tmp_path / "kth.parquet")
    assert report.rows_rejected == 0  # a cleaned log: every record is a job
    origin, submits, core_s, sizes = 0, [], 0, []
    with gzip.open(log, "rt") as f:
        for line in f:
            if line.startswith(";"):
                if line.startswith("; UnixStartTime:"):
                    origin = int(line.split(":")[1])
                continue
            fields = line.split()
            if not fields:
                continue
            submit, run = int(fields[1]), int(fields[3])
            size = int(fields[4]) if int(fields[4]) > 0 else int(fields[7])
            submits.append(origin + submit)
            sizes.append(size)
            core_s += size * run if run >= 0 and size > 0 else 0
    p = profile(tmp_path / "kth.parquet")
    span = max(submits) - min(submits)
    assert p["jobs"] == len(submits) == 27_992
    assert p["load"]["machine_procs"] == 100
    assert p["load"]["core_hours"] == round(core_s / 3600, 2)
    assert _close(p["load"]["offered_load"], core_s / span / 100)
    assert p["size"]["cpus"]["p50"] == float(np.percentile(sizes, 50))
    hours = [0] * 24
    zone = ZoneInfo("Europe/Stockholm")
    for s in submits:
        hours[datetime.fromtimestamp(s, zone).hour] += 1
    assert p["arrivals"]["time_zone"] == "Europe/Stockholm"
    assert p["arrivals"]["by_hour"] == hours


def test_a_table_replaced_while_it_is_read_is_read_whole_as_it_was(
        table: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The profile opens the table once: a new table renamed over it mid-read (as ingest
    --overwrite does) neither breaks the reading ("Invalid thrift") nor mixes the two."""
    import hpcpolicy.stats as stats

    newer = make_table(tmp_path / "newer.parquet", [dict(JOBS[2], job_id=str(i), user=f"n{i}")
                                                    for i in range(40)])
    real = stats.open_job_table

    def replaced_after_opening(path: str | Path) -> Any:
        opened = real(path)
        if newer.exists():
            os.replace(newer, path)
        return opened

    expected = profile(table, procs=4)
    monkeypatch.setattr(stats, "open_job_table", replaced_after_opening)
    assert profile(table, procs=4) == expected
    assert profile(table, procs=4)["jobs"] == 40  # the new table, once opened after


def test_the_machine_size_comes_from_the_table_as_it_was_opened(
        table: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The header's MaxProcs is read from the opened table too, not from a newer one renamed
    over it meanwhile (the figures would mix two versions)."""
    import hpcpolicy.stats as stats

    newer = make_table(tmp_path / "newer.parquet", JOBS, {"MaxProcs": 64})
    real = stats.open_job_table

    def replaced_after_opening(path: str | Path) -> Any:
        opened = real(path)
        if newer.exists():
            os.replace(newer, path)
        return opened

    expected = profile(table)
    assert expected["load"]["machine_procs"] == 2
    monkeypatch.setattr(stats, "open_job_table", replaced_after_opening)
    assert profile(table) == expected
