"""Small files that describe huge inputs (issue 38), written as a stream at any size.

Each builder writes one bomb into a folder and returns the ``hpcpolicy`` arguments that read
it; ``size`` is the bytes of the part that grows (a field, a line, zeros, columns, groups).
``tests/test_input_bombs.py`` builds them small, ``benchmarks/input_bombs.py`` at the sizes
of the issue's findings.

Example:
    >>> import tempfile
    >>> args = BOMBS["swf_zeros"](Path(tempfile.mkdtemp()), 10)
    >>> args[0], args[-2:]
    ('ingest', ['--format', 'swf'])
"""

from __future__ import annotations

import gzip
from collections.abc import Callable, Iterable
from pathlib import Path

from hpcpolicy.ingest import IngestConfig, ingest

__all__ = ["BOMBS", "HELIOS_HEAD", "SWF_HEAD", "SWF_LINE", "helios_row", "write_stream"]

SWF_HEAD = b"; Version: 2.2\n; MaxProcs: 16\n; UnixStartTime: 1709294400\n"
"""Three header lines of a small SWF log."""
SWF_LINE = b"1 0 0 600 4 -1 -1 4 1200 -1 1 1 1 1 1 1 -1 -1\n"
"""One valid SWF job line."""
HELIOS_HEAD = b"job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time\n"
"""The header of a small Helios job log."""
_PIECE = 1 << 20


def helios_row(job: int, user: bytes = b"u1") -> bytes:
    """One valid Helios row, with ``user`` as the user field."""
    return (b"%d,%s,vc1,1,4,1,COMPLETED,2020-06-01 10:00:00,2020-06-01 10:00:05,"
            b"2020-06-01 11:00:05\n" % (job, user))


def _run(byte: bytes, n: int) -> Iterable[bytes]:
    """``n`` copies of ``byte``, in pieces of at most 1 MiB."""
    while n > 0:
        yield byte * min(n, _PIECE)
        n -= _PIECE


def _big_user(size: int) -> list[bytes | Iterable[bytes]]:
    """A Helios log whose second row (line 3) has a user field of ``size`` bytes."""
    return [HELIOS_HEAD, helios_row(1), b"2,", _run(b"a", size),
            b"," + helios_row(2).split(b",", 2)[2], helios_row(3)]


def write_stream(path: Path, parts: Iterable[bytes | Iterable[bytes]], level: int = 1) -> Path:
    """Write ``parts`` (bytes, or iterables of bytes) to ``path``, gzipped at ``level`` when
    its name ends in ``.gz``; nothing is held whole in memory."""
    with (gzip.open(path, "wb", compresslevel=level) if path.suffix == ".gz"
          else open(path, "wb")) as f:
        for part in parts:
            for piece in [part] if isinstance(part, bytes) else part:
                f.write(piece)
    return path


def _ingest(path: Path, *extra: str) -> list[str]:
    return ["ingest", str(path), "-o", str(path.parent / "out.parquet"), *extra]


def csv_gz_field(folder: Path, size: int) -> list[str]:
    """A gzipped Helios log whose second row holds one field of ``size`` bytes."""
    return _ingest(write_stream(folder / "field.csv.gz", _big_user(size)))


def helios_field(folder: Path, size: int) -> list[str]:
    """A plain Helios log whose second row holds one field of ``size`` bytes."""
    return _ingest(write_stream(folder / "field.csv", _big_user(size)))


def swf_gz_line(folder: Path, size: int) -> list[str]:
    """A gzipped SWF log with a line of ``size`` digits right after its header."""
    return _ingest(write_stream(folder / "line.swf.gz", [
        SWF_HEAD, _run(b"1", size), b"\n", SWF_LINE]))


def swf_zeros(folder: Path, size: int) -> list[str]:
    """``size`` zero bytes, read as SWF."""
    return _ingest(write_stream(folder / "zeros.swf", [_run(b"\0", size)]), "--format", "swf")


def swf_gz_ratio(folder: Path, size: int) -> list[str]:
    """A gzipped SWF log of ``size`` bytes of one job line repeated (it expands about 340
    times at gzip's default level)."""
    return _ingest(write_stream(folder / "ratio.swf.gz", [
        SWF_HEAD, (SWF_LINE * 20000 for _ in range(size // (len(SWF_LINE) * 20000) + 1))],
        level=6))


def sacct_columns(folder: Path, size: int) -> list[str]:
    """A sacct export whose header names ``size`` columns (and one data row)."""
    names = b"JobID|Submit|State" + b"".join(b"|c%d" % i for i in range(size - 3))
    row = b"1|2024-01-01T00:00:00|COMPLETED" + b"|" * (size - 3)
    return _ingest(write_stream(folder / "wide.txt", [names, b"\n", row, b"\n"]))


def csv_long_header(folder: Path, size: int) -> list[str]:
    """A Helios log whose header line holds ``size`` bytes (long extra column names)."""
    extra = b"".join(b",x%d_%s" % (i, b"n" * 200) for i in range(size // 206 + 1))
    return _ingest(write_stream(folder / "wide.csv", [
        HELIOS_HEAD.rstrip(b"\n"), extra, b"\n", helios_row(1)]))


def cluster_groups(folder: Path, size: int) -> list[str]:
    """A cluster spec of ``size`` node groups, with a job table to simulate on it."""
    spec = write_stream(folder / "groups.toml", (
        b'[[groups]]\nname = "g%d"\ncount = 1\ncores = 4\n' % i for i in range(size)))
    log = write_stream(folder / "jobs.swf", [SWF_HEAD, *(
        SWF_LINE.replace(b"1 0 0", b"%d %d 0" % (j, j * 60), 1) for j in range(1, 2001))])
    table = folder / "jobs.parquet"
    ingest([log], table, IngestConfig(overwrite=True))
    return ["simulate", str(table), "--cluster", str(spec)]


BOMBS: dict[str, Callable[[Path, int], list[str]]] = {
    "csv_gz_field": csv_gz_field,
    "helios_field": helios_field,
    "swf_gz_line": swf_gz_line,
    "swf_zeros": swf_zeros,
    "swf_gz_ratio": swf_gz_ratio,
    "sacct_columns": sacct_columns,
    "csv_long_header": csv_long_header,
    "cluster_groups": cluster_groups,
}
"""Name -> builder ``(folder, size) -> hpcpolicy arguments``."""
