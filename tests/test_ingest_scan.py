"""The compiled scanners: field parsers, UTF-8 replacement, and reading in pieces.

Expected values come from the documented rules, checked against Python's own readers (``csv``,
``datetime``, ``bytes.decode``) or Polars' string cast where the rule is "as they read it".
"""

from __future__ import annotations

import csv
import io
from datetime import datetime
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from conftest import DATA
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from hpcpolicy.ingest import IngestConfig, detect_format, ingest, text_chunks
from hpcpolicy.ingest.sacct import parse as sacct_parse
from hpcpolicy.ingest.sacct.parse import BAD, EMPTY, OK
from hpcpolicy.ingest.utf8 import copy_replacing

QUIRKS = DATA / "sacct_quirks.txt"


def _bytes(text: str | bytes) -> np.ndarray:
    data = text.encode() if isinstance(text, str) else text
    return np.frombuffer(data, dtype=np.uint8)


# --- field parsers ----------------------------------------------------------------------------

@settings(deadline=None)  # the first call loads the compiled parser
@given(st.text(alphabet="0123456789+- x.", max_size=22))
def test_whole_numbers_read_as_polars_casts_them(text: str) -> None:
    status, value = sacct_parse.whole_number(_bytes(text), 0, len(text))
    expected = pl.Series([text]).cast(pl.Int64, strict=False)[0]
    assert (status, value if status == OK else None) == (
        EMPTY if not text else OK if expected is not None else BAD, expected)


def _stamp(text: str, tsep: str = "T") -> tuple[int, int]:
    words = [w.encode() for w in ("Unknown", "None")]
    ends = np.cumsum([len(w) for w in words]).astype(np.int64)
    return sacct_parse.timestamp(_bytes(text), 0, len(text.encode()), ord(tsep),
                                 _bytes(b"".join(words)), ends)


@settings(max_examples=200, deadline=None)
@given(st.datetimes(min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31)),
       st.booleans())
def test_timestamps_are_seconds_of_the_wall_clock(moment: datetime, short: bool) -> None:
    moment = moment.replace(microsecond=0)
    text = f"{moment.year:04d}-{moment:%m-%dT%H:%M:%S}"
    if short:  # one-digit month, day, hour, minute and second are read too
        text = (f"{moment.year:04d}-{moment.month}-{moment.day}T{moment.hour}:{moment.minute}:"
                f"{moment.second}")
    expected = int((moment - datetime(1970, 1, 1)).total_seconds())
    assert _stamp(text) == (OK, expected)


@pytest.mark.parametrize("text", ["2024-02-30T00:00:00", "2023-02-29T00:00:00",
                                  "2024-13-01T00:00:00", "2024-03-01T24:00:00",
                                  "2024-03-01T23:59:60", "2024-03-01T10:05", "24-03-01T10:05:00",
                                  "2024-03-01 10:05:00", "2024-03-01T10:05:00Z", "soon", "None!"])
def test_timestamps_that_are_no_time_are_bad(text: str) -> None:
    assert _stamp(text) == (BAD, 0)


def test_timestamp_words_for_unknown_and_the_space_form() -> None:
    assert [_stamp(t)[0] for t in ("", "Unknown", "None")] == [EMPTY, EMPTY, EMPTY]
    assert _stamp("2024-03-01 10:05:00", tsep=" ") == (OK, 1709287500)


@pytest.mark.parametrize(
    ("tres", "mem", "node", "gpu"),
    [
        ("billing=8,cpu=8,mem=32000M,node=2", "32000M", "2", None),
        ("billing=4,cpu=4,gres/gpu:a100=2,gres/gpu=2,mem=64G,node=1", "64G", "1", ("a100", "2")),
        ("cpu=1,gres/gpu=4,gres/gpumem=40G,mem=1.5G,node=1", "1.5G", "1", ("", "4")),
        ("gres/gpu:v100=3,gres/gpu:a100=1,cpu=1", None, None, ("v100", "3")),
        ("gres/gpu=2,gres/gpu:a100=2", None, None, ("", "2")),
        ("cpu=1,node=", None, "", None),
        ("gres/gpu:=2,memory=5,cpu", None, None, None),
        ("", None, None, None),
    ],
)
def test_tres_entries(tres: str, mem: str | None, node: str | None,
                      gpu: tuple[str, str] | None) -> None:
    buf = _bytes(tres)

    def entry(key: str) -> str | None:
        status, a, b = sacct_parse.tres_entry(buf, 0, len(tres), _bytes(key))
        return tres[a:b] if status == OK else None

    assert (entry("mem"), entry("node")) == (mem, node)
    status, ta, tb, ca, cb = sacct_parse.tres_gpu(buf, 0, len(tres))
    assert ((tres[ta:tb], tres[ca:cb]) if status == OK else None) == gpu


@settings(deadline=None)
@given(st.binary(max_size=60))
def test_invalid_utf8_replaced_as_python_decodes(data: bytes) -> None:
    out = np.zeros(3 * len(data) + 1, dtype=np.uint8)
    n = copy_replacing(_bytes(data), 0, len(data), out, 0)
    assert bytes(out[:n]).decode() == data.decode("utf-8", errors="replace")


# --- sacct exports read exactly ------------------------------------------------------------

def _jobs(path: Path, tmp_path: Path, name: str = "jobs",
          cfg: IngestConfig | None = None) -> tuple[pl.DataFrame, pl.DataFrame]:
    ingest([path], tmp_path / f"{name}.parquet",
           cfg or IngestConfig(format="sacct", max_reject_fraction=1.0))
    return (pl.read_parquet(tmp_path / f"{name}.parquet"),
            pl.read_parquet(tmp_path / f"{name}.rejects.parquet"))


_NAME = st.text(alphabet=st.characters(blacklist_categories=("Cs",),
                                       blacklist_characters="\n\x00"), max_size=12)


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(names=st.lists(_NAME, min_size=1, max_size=8))
@example(names=["ab\r", "\r", "x\r\ry\r", "", "q\"\r"])
def test_csv_fields_are_read_as_pythons_csv_reads_them(tmp_path: Path, names: list[str]) -> None:
    # CRLF line ends: then Python's writer quotes every field holding a "\r". (With "\n" it
    # leaves a trailing "\r" bare, and "name\r\n" cannot be told from a CRLF line end.)
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\r\n")
    writer.writerow(["JobID", "Submit", "State", "JobName"])
    for i, name in enumerate(names, 1):
        writer.writerow([i, "2024-03-01T10:00:00", "COMPLETED", name])
    path = tmp_path / "names.csv"
    path.write_bytes(buf.getvalue().encode())
    jobs, rejects = _jobs(path, tmp_path, cfg=IngestConfig(max_reject_fraction=1.0,
                                                           overwrite=True))
    expected = {str(i): name for i, name in enumerate(names, 1)}
    assert dict(zip(jobs["job_id"], jobs["job_name"].fill_null(""), strict=True)) == expected
    assert rejects.height == 0


def test_carriage_returns_and_control_bytes_kept_exactly(tmp_path: Path) -> None:
    head = "JobID|Submit|JobName|State"
    rows = ["1|2024-03-01T10:00:00|a\rb\r|COMPLETED",  # \r inside and at a field's end
            "2|2024-03-01T10:00:00|x\x1fy\x1e\x1d|COMPLETED",  # the scan's separators
            "3|2024-03-01T10:00:00|p|q\r|COMPLETED",  # a | in the name: read back, \r kept
            "4|2024-03-01T10:00:00|" + "".join(map(chr, range(1, 32))).replace("\n", "")
            + "|COMPLETED",
            "5|2024-03-01T10:00:00|last\r"]  # a \r before the CRLF line end is text
    path = tmp_path / "ctl.txt"
    path.write_bytes(("\n".join([head, *rows]) + "\r\n").encode())
    jobs, rejects = _jobs(path, tmp_path)
    names = dict(zip(jobs["job_id"], jobs["job_name"], strict=True))
    assert names == {"1": "a\rb\r", "2": "x\x1fy\x1e\x1d", "3": "p|q\r"}
    assert rejects.select("line", "reason", "raw").rows() == [
        (5, "control_chars", rows[3]),  # every control byte at once: kept exactly, rejected
        (6, "field_count", rows[4])]


def test_byte_order_mark_before_the_header(tmp_path: Path) -> None:
    path = tmp_path / "bom.txt"
    path.write_bytes(b"\xef\xbb\xbf" + QUIRKS.read_bytes())
    assert detect_format(path) == "sacct"
    jobs, _ = _jobs(path, tmp_path, cfg=IngestConfig(max_reject_fraction=1.0))
    assert jobs["job_id"][0] == "100"
    swf = tmp_path / "bom.swf"
    swf.write_bytes(b"\xef\xbb\xbf; MaxProcs: 4\n1 0 5 60 4 -1 -1 4 100 -1 1 1 1 -1 1 -1 -1 -1\n")
    assert detect_format(swf) == "swf"


def _export(n_jobs: int) -> str:
    """A sacct export of ``n_jobs`` jobs with steps, a requeued job, a duplicate and an
    orphan step, so that pieces of a few KiB cut between every kind of line."""
    lines = ["JobID|Submit|Start|End|State|NCPUS|JobName"]
    for i in range(1, n_jobs + 1):
        lines.append(f"{i}|2024-03-01T10:00:00|2024-03-01T10:01:00|2024-03-01T10:{i % 50 + 2:02d}"
                     f":00|COMPLETED|{i % 7 + 1}|job{i}")
        lines += [f"{i}.batch||||COMPLETED|1|batch", f"{i}.0||||COMPLETED|1|step"]
        if i % 97 == 0:
            lines.append(f"{i // 2}|2024-03-01T11:00:00|||PENDING|1|again")
    lines.append("99999.batch||||COMPLETED|1|orphan")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("fmt", ["sacct", "swf"])
def test_pieces_of_any_size_give_the_same_tables(tmp_path: Path, fmt: str,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    if fmt == "sacct":
        path = tmp_path / "big.txt"
        path.write_text(_export(3000))
    else:
        path = tmp_path / "big.swf"
        path.write_text("; MaxProcs: 64\n" + "".join(
            f"{i} {i * 7} 5 60 4 -1 -1 {i % 5 + 1} 100 -1 {i % 6} 1 1 -1 1 -1 -1 -1\n"
            for i in range(1, 20000)))
    cfg = IngestConfig(format=fmt, max_reject_fraction=1.0)
    whole = _jobs(path, tmp_path, "whole", cfg)
    monkeypatch.setattr(text_chunks, "CHUNK_BYTES", 3001)  # pieces of about 3 KiB
    pieces = _jobs(path, tmp_path, "pieces", cfg)
    assert whole[0].equals(pieces[0]) and whole[1].equals(pieces[1])
    assert whole[0].height > 1000
    if fmt == "sacct":
        assert set(whole[1]["reason"]) == {"duplicate_superseded", "orphan_step"}

