"""Whole lines of a plain or gzipped text file, in pieces, scanned by two threads in turn.

The compiled scanners (:mod:`hpcpolicy.ingest.swf.scan`, :mod:`hpcpolicy.ingest.sacct.scan`)
and the CSV traces' scan (:mod:`hpcpolicy.ingest.csv_scan`) read their input through
:class:`LineChunks`: about :data:`CHUNK_BYTES` of whole lines at a time, so memory stays
bounded whatever the file size, with gzip decompressed as a stream (several members allowed,
its expansion bounded) and a UTF-8 byte order mark at the start of the file dropped. Every
line is held to :attr:`hpcpolicy.limits.Limits.line_bytes` as it is read.
:func:`scan_pieces` hands the pieces to :data:`WORKERS` threads (the Numba kernels release the
GIL) and returns their results in file order, so that reading a log keeps both cores busy.

Example:
    >>> import pathlib, tempfile
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "t.txt"
    >>> _ = p.write_bytes(b"\\xef\\xbb\\xbfa b\\nc")
    >>> [bytes(buf[:end]) for buf, end in LineChunks(p, "a test log").pieces()]
    [b'a b\\nc']
"""

from __future__ import annotations

import contextlib
import zlib
from collections import deque
from collections.abc import Callable, Generator, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import numpy as np

if TYPE_CHECKING:
    import polars as pl
import numpy.typing as npt

from hpcpolicy.errors import InputFormatError
from hpcpolicy.ingest.detect import BOM, is_gzip
from hpcpolicy.limits import Limits

__all__ = ["CHUNK_BYTES", "SMALL_TEXT_BYTES", "WORKERS", "LineChunks", "Scanned", "push_down",
           "read_bounded", "scan_pieces"]

CHUNK_BYTES = 8 << 20
"""Text handed to a scanner at a time (about 40,000 sacct or 90,000 SWF lines)."""

WORKERS = 2
"""Threads that scan pieces at once."""
SMALL_TEXT_BYTES = 64 << 20
"""Most bytes :func:`read_bounded` returns (a node list or a table of figures is far less)."""

_READ_BYTES = 1 << 20
_BACK_BYTES = 1 << 16


def _after_last_newline(buf: npt.NDArray[np.uint8], end: int) -> int:
    """1 + the index of the last newline in ``buf[:end]``, 0 if there is none (looked for
    backwards, :data:`_BACK_BYTES` at a time: a line's end is usually close)."""
    hi = end
    while hi > 0:
        lo = max(0, hi - _BACK_BYTES)
        found = np.flatnonzero(buf[lo:hi] == 10)
        if len(found):
            return lo + int(found[-1]) + 1
        hi = lo
    return 0


def _line_ends(buf: npt.NDArray[np.uint8], end: int, limit: int) -> tuple[int, int]:
    """How many lines ``buf[:end]`` holds (newlines), and the 0-based index of the first line
    longer than ``limit`` bytes (the newline not counted; a last line without one included),
    -1 when none is."""
    ends = np.flatnonzero(buf[:end] == 10)
    lengths = np.diff(ends, prepend=-1) - 1
    long = np.flatnonzero(lengths > limit)
    if len(long):
        return len(ends), int(long[0])
    tail = end - (int(ends[-1]) + 1 if len(ends) else 0)
    return len(ends), (len(ends) if tail > limit else -1)


def _gunzip(path: Path, limits: Limits) -> Generator[bytes, None, None]:
    """Decompressed pieces of a gzip file (several members allowed), at most
    :data:`_READ_BYTES` each, refusing data that expands past ``limits.gzip_ratio``.

    Raises:
        EOFError: the stream ends inside a member (the file is truncated).
        zlib.error: the compressed data is damaged.
        InputFormatError: the data expands too much (:meth:`Limits.check_gzip`).
    """
    expanded = 0
    with open(path, "rb") as f:
        member = zlib.decompressobj(31)
        fed = False
        while block := f.read(_READ_BYTES):
            fed = True
            while block:
                piece = member.decompress(block, _READ_BYTES)
                if piece:
                    expanded += len(piece)
                    limits.check_gzip(str(path), f.tell(), expanded)
                    yield piece
                block = member.unconsumed_tail
                if member.eof:
                    block = member.unused_data + block
                    if block and not block.startswith(b"\x1f\x8b"):
                        if block.strip(b"\x00"):
                            raise zlib.error("data after the end of the gzip stream")
                        block = b""
                    member = zlib.decompressobj(31)
                    fed = bool(block)
        if fed and not member.eof:
            raise EOFError("the gzip stream ends early")


class LineChunks:
    """The whole lines of a plain or gzipped file, piece by piece, counting the lines passed.

    Every line is checked against ``limits.line_bytes`` as the file is read, before a piece
    that holds it is handed on; a longer line ends the reading with an error naming it.
    """

    def __init__(self, path: Path, kind: str, buffers: int = 1,
                 limits: Limits | None = None, piece_bytes: int | None = None) -> None:
        self.path = path
        self.kind = kind
        """What the file should be, for the error on an endless line (``an SWF text log``)."""
        self.limits = limits or Limits()
        self.lines_before = 0
        """Lines in the pieces before the latest one handed out (its first line is
        ``lines_before + 1``)."""
        self._read = 0
        self.piece_bytes = piece_bytes or CHUNK_BYTES
        """About how many bytes of whole lines a piece holds."""
        size = (self.piece_bytes + self.limits.line_bytes + _READ_BYTES + 7) // 8 * 8  # words
        self._bufs = [np.empty(size, dtype=np.uint8) for _ in range(buffers)]

    def pieces(self) -> Iterator[tuple[npt.NDArray[np.uint8], int]]:
        """``(buffer, end)`` pairs: ``buffer[:end]`` is whole lines (the last piece may end
        without a newline). The ``buffers`` buffers are used in turn: a piece stays valid
        until ``buffers`` more pieces have been asked for.

        Raises:
            InputFormatError: a truncated or damaged gzip stream, a read error, gzip data that
                expands too much, or a line longer than ``limits.line_bytes``.
        """
        try:
            yield from self._pieces()
        except EOFError:
            raise InputFormatError(
                f"{self.path}: the gzip stream is truncated after line {self._read}; copy or "
                "download the file again (a truncated or damaged copy cannot be read)"
            ) from None
        except zlib.error as exc:
            raise InputFormatError(
                f"{self.path}: the gzip data is damaged after line {self._read} ({exc}); copy "
                "or download the file again (a truncated or damaged copy cannot be read)"
            ) from None
        except OSError as exc:
            raise InputFormatError(f"{self.path}: cannot read after line {self._read} "
                                   f"({exc.strerror or exc})") from None

    def _checked(self, buf: npt.NDArray[np.uint8], end: int, filled: int) -> None:
        """Count the lines of ``buf[:end]``; raise if one of them, or the unfinished line
        after them (``buf[end:filled]``), is longer than the limit."""
        lines, long = _line_ends(buf, end, self.limits.line_bytes)
        if long < 0 and filled - end > self.limits.line_bytes:
            long = lines
        if long >= 0:
            raise self.limits.line_error(str(self.path), self._read + long + 1, self.kind)
        self.lines_before, self._read = self._read, self._read + lines

    def _pieces(self) -> Iterator[tuple[npt.NDArray[np.uint8], int]]:
        turn, filled, first = 0, 0, True
        limit = self.limits.line_bytes
        with _reader(self.path, self.limits) as read_into:
            while True:
                buf = self._bufs[turn]
                eof, want = False, self.piece_bytes
                while True:  # about piece_bytes, more if no line ends there
                    while filled < want and not eof:
                        got = read_into(buf[filled:filled + min(_READ_BYTES, want - filled)])
                        filled += got
                        eof = got == 0
                    if first and bytes(buf[:len(BOM)]) == BOM:
                        buf[:filled - len(BOM)] = buf[len(BOM):filled].copy()
                        filled -= len(BOM)
                    first = False
                    end = _after_last_newline(buf, filled)
                    if end or eof or filled > limit:
                        break
                    want = filled + _READ_BYTES
                self._checked(buf, end, filled)
                if eof and filled > end:  # a last line without a newline
                    end, self._read = filled, self._read + 1
                if end:
                    yield buf, end
                turn = (turn + 1) % len(self._bufs)
                carry = filled - end
                if carry:
                    self._bufs[turn][:carry] = buf[end:filled].copy()
                filled = carry
                if eof:
                    return


@contextlib.contextmanager
def _reader(path: Path, limits: Limits) -> Iterator[Callable[[npt.NDArray[np.uint8]], int]]:
    """A function that fills the start of a byte array from the file (decompressing gzip
    within ``limits``) and returns how many bytes it wrote, 0 at the end."""
    if not is_gzip(path):
        with open(path, "rb", buffering=0) as f:
            yield lambda view: f.readinto(view.data) or 0
        return
    stream = _gunzip(path, limits)
    pending = memoryview(b"")

    def read_into(view: npt.NDArray[np.uint8]) -> int:
        nonlocal pending
        if not pending:
            pending = memoryview(next(stream, b""))
        n = min(len(view), len(pending))
        view[:n] = np.frombuffer(pending[:n], dtype=np.uint8)
        pending = pending[n:]
        return n

    try:
        yield read_into
    finally:
        stream.close()


def read_bounded(path: Path, what: str, limits: Limits | None = None,
                 max_bytes: int = SMALL_TEXT_BYTES) -> bytes:
    """The text of a small plain or gzipped file that is parsed whole (Polars' ``read_csv``
    would decompress a gzip file whole, unbounded), read within ``limits`` (default
    :class:`Limits()`) and at most ``max_bytes``.

    Args:
        path: the file.
        what: what it is, for messages (``the node list``).
        limits: the longest line and the gzip expansion accepted.
        max_bytes: the most bytes of text accepted.

    Raises:
        InputFormatError: the file cannot be read, is damaged gzip, or breaks a limit.

    Example:
        >>> import pathlib, tempfile
        >>> p = pathlib.Path(tempfile.mkdtemp()) / "t.csv"
        >>> _ = p.write_bytes(b"a,b\\n1,2\\n")
        >>> read_bounded(p, "a table")
        b'a,b\\n1,2\\n'
    """
    parts: list[bytes] = []
    total = 0
    for buf, end in LineChunks(path, what, limits=limits, piece_bytes=_READ_BYTES).pieces():
        total += end
        if total > max_bytes:
            raise InputFormatError(f"{path}: more than {max_bytes >> 20} MiB of text; is it "
                                   f"really {what}?")
        parts.append(buf[:end].tobytes())
    return b"".join(parts)


class Scanned(Protocol):
    """What scanning one piece gives: at least how many lines the piece holds."""

    lines: int


S = TypeVar("S", bound=Scanned)


def scan_pieces(chunks: LineChunks,
                scan: Callable[[npt.NDArray[np.uint8], int, int, bool], S],
                numbered: bool = False) -> Iterator[tuple[S, int]]:
    """``(scan(buffer, end, first_line, first_piece), offset)`` for each piece of ``chunks``,
    in file order, the pieces scanned by :data:`WORKERS` threads at once.

    A piece is scanned on its own, its lines counted from 1 (``first_line`` 0): add ``offset``
    (the lines of the pieces before) to its line numbers. With ``numbered``, the lines before
    each piece are counted first and handed in as ``first_line`` (``offset`` is then 0), for
    scans that must know absolute line numbers. ``chunks`` must have ``WORKERS + 2`` buffers.
    """
    pending: deque[Future[S]] = deque()
    lines = 0

    def done() -> tuple[S, int]:
        nonlocal lines
        result = pending.popleft().result()
        offset = 0 if numbered else lines
        lines += result.lines
        return result, offset

    with ThreadPoolExecutor(WORKERS, thread_name_prefix="hpcpolicy-scan") as pool:
        try:
            for k, (buf, end) in enumerate(chunks.pieces()):
                pending.append(pool.submit(scan, buf, end,
                                           chunks.lines_before if numbered else 0, k == 0))
                while len(pending) > WORKERS or (pending and pending[0].done()):
                    yield done()
            while pending:
                yield done()
        finally:
            for job in pending:
                job.cancel()


def push_down(frames: Iterator[pl.DataFrame], with_columns: list[str] | None,
              predicate: pl.Expr | None, n_rows: int | None,
              ) -> Generator[pl.DataFrame, None, bool]:
    """Apply a Polars IO source's pushed-down projection, filter and row limit to ``frames``.

    Returns (as the generator's value) True when every frame was read, False when the row
    limit cut the reading short.
    """
    left = n_rows
    for df in frames:
        if predicate is not None:
            df = df.filter(predicate)
        if with_columns is not None:
            df = df.select(with_columns)
        if left is not None:
            df = df.head(left)
            left -= df.height
        yield df
        if left is not None and left <= 0:
            return False
    return True


def lazy_frames(batches: Callable[[], Iterator[pl.DataFrame]],
                schema: pl.Schema | Mapping[str, Any], name: str, path: Path) -> pl.LazyFrame:
    """A lazy frame read from ``batches()`` when collected, with Polars' projection, filter
    and row limit pushed down (:func:`push_down`); ``name`` and ``path`` show in ``explain``."""
    from polars.io.plugins import register_io_source

    def source(with_columns: list[str] | None, predicate: pl.Expr | None, n_rows: int | None,
               batch_size: int | None) -> Iterator[pl.DataFrame]:
        yield from push_down(batches(), with_columns, predicate, n_rows)

    return register_io_source(source, schema=schema, is_pure=True, explain_name=name,
                              explain_detail=str(path))
