"""Parsers of single sacct fields (hpcpolicy.ingest.slurm_fields), one form at a time.

Expected values are worked out by hand from the field's documented meaning (Slurm's sacct
man page), not by running the parser.
"""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import polars as pl
import pytest

from hpcpolicy.ingest import slurm_fields as sf
from hpcpolicy.ingest.sacct import parse as sacct_parse


def _eval(values: list[str | None], make: object) -> list[object]:
    """Apply ``make(pl.col("t"))`` to a one-column frame and return the result as a list."""
    frame = pl.DataFrame({"t": values}, schema={"t": pl.String})
    return frame.select(make(pl.col("t")).alias("out"))["out"].to_list()  # type: ignore[operator]


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("1-02:03:04", 86400 + 2 * 3600 + 3 * 60 + 4),
        ("02:03:04", 2 * 3600 + 3 * 60 + 4),
        ("03:04", 3 * 60 + 4),  # MM:SS
        ("00:01.500", 1),  # fractional seconds are dropped
        ("7", 7 * 60),  # bare minutes, as sbatch -t reads them
        ("2-12", 2 * 86400 + 12 * 3600),  # D-HH
        ("2-12:30", 2 * 86400 + 12 * 3600 + 30 * 60),  # D-HH:MM
        ("29-04:00:00", 29 * 86400 + 4 * 3600),
    ],
)
def test_duration_forms(text: str, seconds: int) -> None:
    out = pl.DataFrame({"t": [text]}).select(p=sf.duration_parts(pl.col("t")), t=pl.col("t"))
    got = out.select(s=sf.duration_s(pl.col("p")), bad=sf.duration_bad(pl.col("p"), pl.col("t")))
    assert got.row(0) == (seconds, False)
    assert sf.duration_seconds(text) == seconds  # one value, outside a table (advise)


@pytest.mark.parametrize("text", ["UNLIMITED", "Partition_Limit", "INVALID", "", None])
def test_duration_unset_words_are_null_not_bad(text: str | None) -> None:
    out = pl.DataFrame({"t": [text]}, schema={"t": pl.String})
    out = out.select(p=sf.duration_parts(pl.col("t")), t=pl.col("t"))
    got = out.select(s=sf.duration_s(pl.col("p")), bad=sf.duration_bad(pl.col("p"), pl.col("t")))
    assert got.row(0) == (None, False)


@pytest.mark.parametrize("text", ["soon", "1:2:3:4", "-01:00", "1-", "12:xx"])
def test_duration_garbage_is_bad(text: str) -> None:
    out = pl.DataFrame({"t": [text]}).select(p=sf.duration_parts(pl.col("t")), t=pl.col("t"))
    got = out.select(s=sf.duration_s(pl.col("p")), bad=sf.duration_bad(pl.col("p"), pl.col("t")))
    assert got.row(0) == (None, True)
    assert sf.duration_seconds(text) is None


def _naive(texts: list[str], tsep: str = "T") -> pl.Series:
    """The texts read by the scan's timestamp parser (null unless it reads a time)."""
    words = [w.encode() for w in sf.MISSING if w]
    packed = np.frombuffer(b"".join(words), dtype=np.uint8)
    ends = np.cumsum([len(w) for w in words]).astype(np.int64)
    seconds = []
    for text in texts:
        buf = np.frombuffer(text.encode(), dtype=np.uint8)
        status, value = sacct_parse.timestamp(buf, 0, len(buf), ord(tsep), packed, ends)
        seconds.append(value if status == sacct_parse.OK else None)
    return (pl.Series("t", seconds, dtype=pl.Int64) * 1000).cast(pl.Datetime("ms"))


def test_timestamps_utc_and_missing_words() -> None:
    naive = _naive(["2024-03-01T10:05:00", "Unknown", "None", "", "2024-13-45T99:00:00"])
    got = pl.select(sf.to_utc(pl.lit(naive), "UTC"))["t"].to_list()
    assert got == [datetime(2024, 3, 1, 10, 5, tzinfo=UTC), None, None, None, None]
    present = _eval(["x", "Unknown", "None", "", None], sf.is_present)
    assert present == [True, False, False, False, False]


def test_local_time_converted_to_utc_with_dst() -> None:
    tz = "Europe/Stockholm"
    # winter: UTC+1; summer: UTC+2; 2024-10-27 02:30 happens twice (earlier = UTC+2);
    # 2024-03-31 02:30 never happens (clocks jump from 02:00 to 03:00)
    naive = _naive(["2024-01-15T12:00:00", "2024-07-15T12:00:00", "2024-10-27T02:30:00",
                    "2024-03-31T02:30:00"])
    got = pl.select(sf.to_utc(pl.lit(naive), tz))["t"].to_list()
    assert got == [datetime(2024, 1, 15, 11, tzinfo=UTC), datetime(2024, 7, 15, 10, tzinfo=UTC),
                   datetime(2024, 10, 27, 0, 30, tzinfo=UTC), None]
    ambiguous = pl.select(sf.is_ambiguous_local(pl.lit(naive), tz))["t"].to_list()
    assert ambiguous == [False, False, True, False]


def test_space_separated_timestamps() -> None:
    naive = _naive(["2024-03-01 10:05:00"], tsep=" ")
    got = pl.select(sf.to_utc(pl.lit(naive), "UTC"))["t"].to_list()
    assert got == [datetime(2024, 3, 1, 10, 5, tzinfo=UTC)]


@pytest.mark.parametrize(
    ("text", "cpus", "nodes", "mib"),
    [
        ("4000Mc", 8, 2, 4000 * 8),  # per CPU
        ("64Gn", 8, 2, 64 * 1024 * 2),  # per node
        ("1.50Gn", 4, 1, 1536),  # older sacct printed decimal units
        ("4000M", 8, 2, 4000),  # new style: the job's total
        ("2T", 1, 1, 2 * 1024 * 1024),
        ("512K", 1, 1, 0.5),
        ("1000", 3, 1, 1000),  # no unit: MiB
    ],
)
def test_req_mem_forms(text: str, cpus: int, nodes: int, mib: float) -> None:
    out = pl.DataFrame({"t": [text]}).select(p=sf.size_parts(pl.col("t")))
    got = out.select(sf.size_mib(pl.col("p"), pl.lit(cpus), pl.lit(nodes)).alias("m")).item()
    assert got == pytest.approx(mib)


def test_req_mem_whole_node_and_garbage() -> None:
    out = pl.DataFrame({"t": ["0n", "lots", ""]}).select(p=sf.size_parts(pl.col("t")))
    parts = out["p"].to_list()
    assert parts[0] == {"1": "0", "2": "", "3": "n"}  # 0n: all memory of each node
    assert parts[1] == {"1": None, "2": None, "3": None}


@pytest.mark.parametrize(
    ("text", "parts"),
    [
        ("123", {"1": "123", "2": None, "3": None, "4": None}),
        ("123_4", {"1": "123", "2": "4", "3": None, "4": None}),
        ("123_[5-9%2]", {"1": "123", "2": None, "3": "[5-9%2]", "4": None}),
        ("123_[1,3,7-9]", {"1": "123", "2": None, "3": "[1,3,7-9]", "4": None}),
        ("123+1", {"1": "123", "2": None, "3": None, "4": "1"}),
        ("abc", {"1": None, "2": None, "3": None, "4": None}),
        ("123_x", {"1": None, "2": None, "3": None, "4": None}),
    ],
)
def test_job_id_forms(text: str, parts: dict[str, str | None]) -> None:
    assert _eval([text], sf.job_id_parts) == [parts]


def test_states_and_exit_codes() -> None:
    states = ["COMPLETED", "CANCELLED by 1234", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY",
              "NODE_FAIL", "BOOT_FAIL", "PREEMPTED", "PENDING", "REQUEUED", "RUNNING",
              "SUSPENDED", "FAILED", "DEADLINE", "CD", "SOMETHING_NEW", ""]
    assert _eval(states, sf.state_of) == [
        "completed", "cancelled", "cancelled", "timeout", "oom", "node_fail", "node_fail",
        "preempted", "pending", "pending", "running", "running", "failed", "timeout",
        "completed", None, None]
    assert _eval(["0:0", "1:0", "0:15", "137:9", "x:y", ""], sf.exit_status) == [
        0, 1, 0, 137, None, None]


def test_every_slurm_state_maps_to_a_job_table_state() -> None:
    from hpcpolicy.schema import JOB_STATES

    assert set(sf.STATES.values()) <= set(JOB_STATES)
    assert _eval(list(sf.STATES), sf.state_of) == list(sf.STATES.values())


def test_lookup_is_a_when_chain_not_replace_strict() -> None:
    """replace_strict would push the whole ingest out of the streaming engine."""
    expr = sf.lookup(pl.col("t"), {"a": 1, "b": 2, "c": 1})
    assert "replace" not in str(expr)
    assert _eval(["a", "b", "c", "d"], lambda t: sf.lookup(t, {"a": 1, "b": 2, "c": 1})) == [
        1, 2, 1, None]


def test_text_missing_words() -> None:
    assert _eval(["alice", "", None], sf.text) == ["alice", None, None]
    assert _eval(["n01", "None assigned", ""], lambda t: sf.text(t, sf.MISSING)) == [
        "n01", None, None]
