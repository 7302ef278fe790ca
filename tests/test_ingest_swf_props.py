"""Property tests of the SWF reader: generated valid and malformed lines.

The expected verdict of each line comes from :func:`verdict`, a plain-Python reading of the
rules documented in :mod:`hpcpolicy.ingest.swf.scan` (regex and ``float``), written apart
from the compiled scanner it checks.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchmarks.builders.swf_oracle import (
    HEADER,
    HEADER_LINES,
    LIMIT,
    SKIP,
    extended,
    is_row,
    verdict,
)
from hpcpolicy.errors import InputFormatError
from hpcpolicy.ingest import IngestConfig, ingest
from hpcpolicy.ingest.swf.reader import plan_swf

# --- strategies ----------------------------------------------------------------------------

def _number(limit: float) -> st.SearchStrategy[bytes]:
    whole = st.integers(0, int(limit)).map(lambda n: str(n).encode())
    decimal = st.tuples(st.integers(0, min(int(limit) - 1, 10**6)), st.integers(0, 999)).map(
        lambda t: f"{t[0]}.{t[1]:03d}".encode())
    return st.one_of(st.just(b"-1"), whole, whole, decimal)


SEP = st.text(alphabet=" \t", min_size=1, max_size=4).map(str.encode)
EDGE = st.text(alphabet=" \t", max_size=3).map(str.encode)
GOOD_FIELDS = st.tuples(*[_number(lim) for lim in LIMIT]).map(list)
GARBAGE = st.one_of(
    st.text(alphabet="abcxyzeE!#$%&*/:<=>?@[]^_{|}~'\"()-+.", min_size=1, max_size=6),
    st.sampled_from(["1e5", "nan", "inf", "--1", "1.2.3", ".", "-", "0x10", "١٢"]),
).map(lambda s: s.encode())
ABSURD = st.one_of(
    st.integers(-10**6, -2).map(lambda n: str(n).encode()),
    st.sampled_from([b"-1.5", b"-0.5", b"99999999999999", b"1e30", b"1234567890123456789"]),
)
INVALID_UTF8 = st.sampled_from([b"\xff", b"\xc3", b"\xe2\x82", b"\xed\xa0\x80", b"\x80abc"])


@st.composite
def swf_line(draw: st.DrawFn) -> bytes:
    """A valid line, or one with a known defect."""
    fields = draw(GOOD_FIELDS)
    kind = draw(st.sampled_from(["valid", "valid", "count", "garbage", "absurd", "utf8",
                                 "blank", "comment"]))
    if kind == "blank":
        return draw(EDGE)
    if kind == "comment":
        return draw(EDGE) + b";" + draw(st.binary(max_size=20)).replace(b"\n", b" ")
    at = draw(st.integers(0, 17))
    if kind == "count":
        n = draw(st.one_of(st.integers(1, 17), st.integers(19, 25)))
        fields = (fields * 2)[:n]
    elif kind == "garbage":
        fields[at] = draw(GARBAGE)
    elif kind == "absurd":
        fields[at] = draw(ABSURD)
    elif kind == "utf8":
        fields[at] = fields[at] + draw(INVALID_UTF8)
    seps = [draw(SEP) for _ in fields[1:]]
    body = fields[0] + b"".join(s + f for s, f in zip(seps, fields[1:], strict=True))
    return draw(EDGE) + body + draw(EDGE)


LOGS = st.lists(swf_line(), min_size=1, max_size=40)
TAILS = st.sampled_from([b"", b" n[1-4] batch", b"\t7", b" caf\xe9"])
"""Columns after field 18 on every data line, as some simulators write (issue 41)."""


def _write(lines: list[bytes], folder: str, crlf: bool) -> Path:
    path = Path(folder) / "log.swf"
    end = b"\r\n" if crlf else b"\n"
    path.write_bytes(HEADER.replace(b"\n", end) + end.join(lines) + end)
    return path


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lines=LOGS, crlf=st.booleans(), tail=TAILS)
def test_every_line_gets_its_documented_verdict(lines: list[bytes], crlf: bool,
                                                tail: bytes) -> None:
    lines = [ln + tail if is_row(ln) else ln for ln in lines]
    wide = extended(lines)
    expected = {HEADER_LINES + i + 1: verdict(line, wide) for i, line in enumerate(lines)}
    expected = {n: v for n, v in expected.items() if v != SKIP}
    with tempfile.TemporaryDirectory() as folder:
        plan = plan_swf(_write(lines, folder, crlf), IngestConfig(format="swf"))
        got = dict(plan.frame.select("_line", "_reason").collect().rows())
    assert got == expected


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lines=LOGS)
def test_rows_read_are_kept_plus_rejected(lines: list[bytes]) -> None:
    verdicts = [verdict(line, extended(lines)) for line in lines]
    rows = [v for v in verdicts if v != SKIP]
    with tempfile.TemporaryDirectory() as folder:
        path = _write(lines, folder, crlf=False)
        if not rows:
            return  # a log of comments only is refused; the CLI tests cover that message
        cfg = IngestConfig(format="swf", max_reject_fraction=1.0)
        if all(v == "step_folded" for v in rows):  # only partial runs folded: no job at all
            with pytest.raises(InputFormatError, match="no job rows found"):
                ingest([path], Path(folder) / "jobs.parquet", cfg)
            return
        report = ingest([path], Path(folder) / "jobs.parquet", cfg)
    assert report.rows_read == len(rows)
    assert report.rows_read == report.jobs_kept + report.rows_rejected + report.steps_folded
    assert report.jobs_kept == rows.count(None)
    assert report.steps_folded == rows.count("step_folded")
    rejected = {v: rows.count(v) for v in set(rows) if v not in (None, "step_folded")}
    assert report.rejected_by_reason == rejected
