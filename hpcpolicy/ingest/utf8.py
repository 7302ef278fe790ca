"""UTF-8 checks on raw bytes for the compiled scanners (Numba, no Python per byte).

:func:`valid_len` measures one encoded character; :func:`invalid_len` measures what Python's
``bytes.decode("utf-8", errors="replace")`` turns into one U+FFFD (the "maximal subpart" of
the Unicode standard), so that :func:`copy_replacing` writes exactly the text that decoding
with replacement would give.

The kernels that call these functions are compiled with ``cache=True``, and Numba's cache
does not notice edits to a module a kernel calls into: after changing this one, delete
``hpcpolicy/ingest/__pycache__/*.nbi`` and ``*.nbc``.

Example:
    >>> import numpy as np
    >>> data = "café".encode() + b"\\xe2\\x82!"
    >>> buf = np.frombuffer(data, dtype=np.uint8)
    >>> out = np.zeros(3 * len(data), dtype=np.uint8)
    >>> n = copy_replacing(buf, 0, len(data), out, 0)
    >>> bytes(out[:n]).decode() == data.decode("utf-8", errors="replace")
    True
"""

from __future__ import annotations

import numba as nb
import numpy as np
import numpy.typing as npt

__all__ = ["copy_replacing", "invalid_len", "is_valid", "valid_len"]

_REPLACEMENT = np.frombuffer("\ufffd".encode(), dtype=np.uint8)


@nb.njit(cache=True, nogil=True)
def _second_byte_range(c: int) -> tuple[int, int, int]:
    """(continuation bytes needed, lowest and highest allowed second byte) after lead byte
    ``c``; needed is 0 when ``c`` cannot start a character."""
    if 0xC2 <= c <= 0xDF:
        return 1, 0x80, 0xBF
    if c == 0xE0:
        return 2, 0xA0, 0xBF
    if 0xE1 <= c <= 0xEC or 0xEE <= c <= 0xEF:
        return 2, 0x80, 0xBF
    if c == 0xED:
        return 2, 0x80, 0x9F
    if c == 0xF0:
        return 3, 0x90, 0xBF
    if 0xF1 <= c <= 0xF3:
        return 3, 0x80, 0xBF
    if c == 0xF4:
        return 3, 0x80, 0x8F
    return 0, 0, 0


@nb.njit(cache=True, nogil=True)
def _matched(buf: npt.NDArray[np.uint8], i: int, end: int) -> tuple[int, int]:
    """(bytes of ``buf[i:end]`` that form a valid prefix of one character, bytes the
    character needs); the character is complete when the two are equal."""
    need, lo, hi = _second_byte_range(buf[i])
    if need == 0:
        return 0, 1
    got = 1
    if i + 1 < end and lo <= buf[i + 1] <= hi:
        got = 2
        while got <= need and i + got < end and 0x80 <= buf[i + got] <= 0xBF:
            got += 1
    return got, need + 1


@nb.njit(cache=True, nogil=True)
def valid_len(buf: npt.NDArray[np.uint8], i: int, end: int) -> int:
    """Length of the valid UTF-8 sequence starting at ``buf[i]`` (a byte >= 0x80), else 0."""
    got, need = _matched(buf, i, end)
    return got if got == need else 0


@nb.njit(cache=True, nogil=True)
def invalid_len(buf: npt.NDArray[np.uint8], i: int, end: int) -> int:
    """Bytes from ``buf[i]`` (where :func:`valid_len` is 0) that one U+FFFD replaces."""
    got, _ = _matched(buf, i, end)
    return max(got, 1)


@nb.njit(cache=True, nogil=True)
def is_valid(buf: npt.NDArray[np.uint8], s: int, e: int) -> bool:
    """Whether ``buf[s:e]`` is valid UTF-8."""
    i = s
    while i < e:
        if buf[i] < 0x80:
            i += 1
            continue
        n = valid_len(buf, i, e)
        if n == 0:
            return False
        i += n
    return True


@nb.njit(cache=True, nogil=True)
def copy_replacing(buf: npt.NDArray[np.uint8], s: int, e: int, out: npt.NDArray[np.uint8],
                   o: int) -> int:
    """Copy ``buf[s:e]`` to ``out[o:]`` with each invalid sequence replaced by U+FFFD, as
    Python's decoder with ``errors="replace"`` does; return the new end in ``out``."""
    i = s
    while i < e:
        c = buf[i]
        if c < 0x80:
            out[o] = c
            o += 1
            i += 1
            continue
        n = valid_len(buf, i, e)
        if n:
            for j in range(n):
                out[o + j] = buf[i + j]
            o += n
            i += n
        else:
            for j in range(3):
                out[o + j] = _REPLACEMENT[j]
            o += 3
            i += invalid_len(buf, i, e)
    return o
