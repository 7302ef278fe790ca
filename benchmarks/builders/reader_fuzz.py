"""Mutated log lines for every reader, and the property each ingest of them must keep.

Shared by ``tests/test_reader_fuzz.py`` (a few examples per reader in the default suite) and
``benchmarks/fuzz_readers.py`` (thousands). A seed log (a fixture of ``tests/data``, or the
first lines of a real trace) is split into its header and its rows; an example keeps some rows
and mutates them: bytes inserted or deleted, a field replaced by a hostile value (separators,
quotes, line breaks, markup, escape sequences, bytes that are not UTF-8, numbers past every
range), a field dropped or repeated, a row cut short, repeated or moved. Whatever the text,
the ingest either refuses the file with one line (:class:`hpcpolicy.errors.HpcPolicyError`)
or accounts for every row: rows read = kept + rejected + folded, the written table and
rejects hold exactly those counts, and no kept job lacks a submit time.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl
from hypothesis import strategies as st

from benchmarks.builders.swf_oracle import SKIP, verdict
from hpcpolicy.errors import HpcPolicyError
from hpcpolicy.ingest import IngestConfig, ingest

DATA = Path(__file__).resolve().parents[2] / "tests" / "data"

HOSTILE = [
    b"|", b",", b'"', b"\n", b"\r", b"\r\n", b";", b" ", b"\t", b"", b"\x00", b"\x0b",
    b"[/]", b"[link=https://x]y[/link]", b"\x1b[31m", b"\xff\xfe", b"\xc3", b"\xe2\x80\xae",
    b"99999999999999999999999", b"-99999999999", b"253402300800", b"1e400", b"nan", b"inf",
    b"-1", b"0", b"-0.5", b"1.5", b"2024-02-30T25:61:61", b"9999-12-31T23:59:59",
    b"0001-01-01T00:00:00", b"UNLIMITED", b"1-00:00:00", b"0n", b"64Gn", b"CANCELLED by 0",
    b"gres/gpu=99999999999", b"123_[5-9%2]", b"123.batch", b"123+1", b"Unknown",
]
"""Values a hostile or broken log may hold in a field."""

SEPARATORS = {"swf": None, "sacct": b"|", "alibaba": b",", "helios": b",", "philly": b","}
"""How each format splits a row into fields (None: runs of blanks)."""


@dataclass(frozen=True)
class Seed:
    """A log to mutate: its format, header lines and rows (each without its line end)."""

    fmt: str
    header: list[bytes]
    rows: list[bytes]


def seed_from(fmt: str, path: Path, max_rows: int = 40) -> Seed:
    """The header and the first ``max_rows`` rows of ``path`` (plain or gzipped)."""
    import gzip

    if path.suffix == ".gz":
        with gzip.open(path) as f:
            raw = f.read()
    else:
        raw = path.read_bytes()
    lines = raw.split(b"\n")
    if fmt == "swf":
        header = [ln for ln in lines[:400] if ln.startswith(b";")]
        rows = [ln for ln in lines if ln.strip() and not ln.startswith(b";")][:max_rows]
    else:
        header, rows = lines[:1], [ln for ln in lines[1:] if ln.strip()][:max_rows]
    return Seed(fmt, header, rows)


FIXTURES = {
    "swf": DATA / "stats_tiny.swf",
    "sacct": DATA / "sacct_quirks.txt",
    "alibaba": DATA / "alibaba" / "openb_pod_list_test.csv",
    "helios": DATA / "helios_cluster_log.csv",
    "philly": DATA / "philly_jobs.csv",
}
"""The small seed log of each reader (tests/data)."""


def _split(row: bytes, sep: bytes | None) -> list[bytes]:
    return row.split() if sep is None else row.split(sep)


def _join(fields: list[bytes], sep: bytes | None) -> bytes:
    return (b" " if sep is None else sep).join(fields)


def _mutate(row: bytes, op: str, a: int, b: int, value: bytes, sep: bytes | None) -> bytes:
    """``row`` after one mutation; ``a`` and ``b`` pick positions (taken modulo the size)."""
    if op == "insert":
        at = a % (len(row) + 1)
        return row[:at] + value + row[at:]
    if op == "delete":
        at = a % (len(row) + 1)
        return row[:at] + row[at + b % 16:]
    if op == "truncate":
        return row[: a % (len(row) + 1)]
    fields = _split(row, sep)
    if not fields:
        return value
    k = a % len(fields)
    if op == "field":
        fields[k] = value
    elif op == "drop":
        del fields[k]
    elif op == "repeat":
        fields.insert(k, fields[k])
    return _join(fields, sep)


MUTATION = st.tuples(
    st.sampled_from(["insert", "delete", "truncate", "field", "field", "drop", "repeat"]),
    st.integers(0, 10**6), st.integers(0, 10**6),
    st.one_of(st.sampled_from(HOSTILE), st.binary(max_size=6)),
)


@st.composite
def mutated_log(draw: Any, seed: Seed) -> bytes:
    """A log built from ``seed``: some of its rows, a few of them mutated, maybe reordered or
    repeated, with the header (itself mutated now and then)."""
    sep = SEPARATORS[seed.fmt]
    rows = list(seed.rows[: draw(st.integers(1, len(seed.rows)))])
    for _ in range(draw(st.integers(1, 4))):
        i = draw(st.integers(0, len(rows) - 1))
        rows[i] = _mutate(rows[i], *draw(MUTATION), sep)
    shuffle = draw(st.sampled_from(["none", "none", "repeat", "swap"]))
    if shuffle == "repeat":
        rows.append(rows[draw(st.integers(0, len(rows) - 1))])
    elif shuffle == "swap" and len(rows) > 1:
        i, j = draw(st.integers(0, len(rows) - 1)), draw(st.integers(0, len(rows) - 1))
        rows[i], rows[j] = rows[j], rows[i]
    header = list(seed.header)
    if header and draw(st.integers(0, 9)) == 0:
        i = draw(st.integers(0, len(header) - 1))
        header[i] = _mutate(header[i], *draw(MUTATION), sep)
    return b"\n".join([*header, *rows]) + b"\n"


def check_ingest(fmt: str, content: bytes, folder: Path) -> str:
    """Ingest ``content`` as ``fmt``; assert the property; return "refused" or "read".

    Any exception but a one-line :class:`HpcPolicyError` propagates (a traceback: a bug).
    """
    log = folder / f"log.{'swf' if fmt == 'swf' else 'txt' if fmt == 'sacct' else 'csv'}"
    log.write_bytes(content)
    out = folder / "t.parquet"
    cfg = IngestConfig(format=fmt, overwrite=True, max_reject_fraction=1.0)
    try:
        report = ingest([log], out, cfg)
    except HpcPolicyError as exc:
        assert "\n" not in str(exc), str(exc)
        return "refused"
    assert report.rows_read == report.jobs_kept + report.rows_rejected + report.steps_folded
    table = pl.read_parquet(out)
    assert table.height == report.jobs_kept
    assert table["submit_time"].null_count() == 0
    assert pl.read_parquet(folder / "t.rejects.parquet").height == report.rows_rejected
    if fmt == "swf":  # every line that is not blank or a comment is a row
        rows = [ln for ln in content.split(b"\n") if verdict(ln) != SKIP]
        assert report.rows_read == len(rows), (report.rows_read, len(rows))
    return "read"
