"""Compiled parsers of the sacct fields whose parsing dominated the cost of reading sacct.

The scan (:mod:`hpcpolicy.ingest.sacct.kernel`) parses these while the bytes are in cache,
instead of handing their text to Polars: on 3 M jobs the regular expressions over ``ReqTRES``
/ ``AllocTRES`` and the timestamp parsing took about 3 CPU-seconds there, more than the scan.
The other fields stay text, parsed by :mod:`hpcpolicy.ingest.slurm_fields`. Each parser reads
``buf[a:b]`` and returns a status (:data:`EMPTY`, :data:`OK`, :data:`BAD`) with its value.

* :func:`whole_number`: optional sign and decimal digits (leading zeros allowed) within
  int64, as Polars' string-to-integer cast reads it; anything else is BAD.
* :func:`timestamp`: ``YYYY-MM-DDTHH:MM:SS`` (or with a space for the ``T``; one-digit month,
  day, hour, minute and second accepted), a real calendar date and time of day, as seconds
  since 1970 of the same wall-clock time; the words of :data:`hpcpolicy.ingest.slurm_fields.
  MISSING` are EMPTY.
* :func:`tres_entry` / :func:`tres_gpu`: in a TRES list (``billing=8,cpu=8,gres/gpu:a100=2,
  mem=32G,node=1``) the value of the first entry named ``key``; the GPUs: the type of the
  first GPU entry (``gres/gpu:TYPE=N``; ``gres/gpumem`` is not one) and the count of the
  ``gres/gpu=N`` entry, else of the first typed one.

The kernels that call these functions are compiled with ``cache=True``, and Numba's cache
does not notice edits to a module a kernel calls into: after changing this one, delete
``hpcpolicy/ingest/__pycache__/*.nbi`` and ``*.nbc``.

Example:
    >>> import numpy as np
    >>> text = np.frombuffer(b"2024-03-01T10:05:00", dtype=np.uint8)
    >>> timestamp(text, 0, len(text), ord("T"), np.empty(0, np.uint8), np.zeros(1, np.int64))
    (1, 1709287500)
"""

from __future__ import annotations

import numba as nb
import numpy as np
import numpy.typing as npt

__all__ = ["BAD", "EMPTY", "OK", "timestamp", "tres_entry", "tres_gpu", "uidx", "whole_number"]

EMPTY, OK, BAD = 0, 1, 2
"""Statuses: no value (empty, or a word meaning "not known"), a value, text that is not one."""

_DIGIT0, _PLUS, _MINUS, _COMMA, _EQ, _COLON, _DASH = 48, 43, 45, 44, 61, 58, 45
_GPU = np.frombuffer(b"gres/gpu", dtype=np.uint8)


@nb.njit(cache=True, nogil=True, inline="always")
def uidx(i: int) -> np.uint64:
    """An index as unsigned: Numba then skips the negative-index wrap-around, a test per byte
    that also keeps LLVM from vectorising a loop (a copy runs 5x faster without it)."""
    return np.uint64(i)


@nb.njit(cache=True, nogil=True, inline="always")
def _digit(buf: npt.NDArray[np.uint8], i: int) -> np.uint8:
    """The digit at ``buf[i]``, or 10 (or more) when it is not one."""
    return np.uint8(buf[uidx(i)] - _DIGIT0)


@nb.njit(cache=True, nogil=True)
def whole_number(buf: npt.NDArray[np.uint8], a: int, b: int) -> tuple[int, int]:
    """(status, value) of a whole number."""
    if a == b:
        return EMPTY, 0
    neg = buf[uidx(a)] == _MINUS
    i = a + 1 if neg or buf[uidx(a)] == _PLUS else a
    if i == b:
        return BAD, 0
    limit = np.uint64(9223372036854775808) if neg else np.uint64(9223372036854775807)
    v = np.uint64(0)
    while i < b:
        d = _digit(buf, i)
        if d > 9:
            return BAD, 0
        if v > (limit - np.uint64(d)) // np.uint64(10):
            return BAD, 0
        v = v * np.uint64(10) + np.uint64(d)
        i += 1
    if neg:
        return OK, int(-np.int64(v - np.uint64(1)) - 1)
    return OK, int(np.int64(v))


@nb.njit(cache=True, nogil=True)
def _digits(buf: npt.NDArray[np.uint8], i: int, b: int, most: int) -> tuple[int, int]:
    """(value, position after) of 1 to ``most`` digits at ``buf[i]``; position -1 if none."""
    v = 0
    j = i
    while j < b and j - i < most:
        d = _digit(buf, j)
        if d > 9:
            break
        v = v * 10 + int(d)
        j += 1
    return v, (j if j > i else -1)


@nb.njit(cache=True, nogil=True)
def _part(buf: npt.NDArray[np.uint8], i: int, b: int, then: int) -> tuple[int, int]:
    """(value, position of the byte ``then`` after it) of the 1- or 2-digit number after
    ``buf[i]``; position ``b + 1`` (past any end) when the text is not so; ``then`` -1: the
    number must end the text (position ``b``)."""
    if i < 0 or i >= b:
        return 0, b + 1
    v, j = _digits(buf, i + 1, b, 2)
    if j < 0 or (then >= 0 and (j >= b or buf[j] != then)):
        return 0, b + 1
    return v, j


@nb.njit(cache=True, nogil=True)
def _is_word(buf: npt.NDArray[np.uint8], a: int, b: int, words: npt.NDArray[np.uint8],
             ends: npt.NDArray[np.int64]) -> bool:
    """Whether ``buf[a:b]`` is one of the words packed in ``words`` (word k ends at
    ``ends[k]``)."""
    start = 0
    for k in range(len(ends)):
        end = ends[k]
        if end - start == b - a:
            same = True
            for j in range(b - a):
                if buf[a + j] != words[start + j]:
                    same = False
                    break
            if same:
                return True
        start = end
    return False


@nb.njit(cache=True, nogil=True)
def timestamp(buf: npt.NDArray[np.uint8], a: int, b: int, tsep: int,
              missing: npt.NDArray[np.uint8], missing_ends: npt.NDArray[np.int64]
              ) -> tuple[int, int]:
    """(status, seconds since 1970-01-01 00:00:00 of the same wall-clock time) of a
    timestamp whose date and time are separated by ``tsep``."""
    if b - a == 19 and buf[uidx(a + 4)] == _DASH and buf[uidx(a + 7)] == _DASH and buf[
            uidx(a + 10)] == tsep and buf[uidx(a + 13)] == _COLON and buf[uidx(a + 16)] == _COLON:
        # the form sacct prints, digits where they must be
        high, low = _pair(buf, a), _pair(buf, a + 2)
        return _seconds(high * 100 + low if high < 100 and low < 100 else -1, _pair(buf, a + 5),
                        _pair(buf, a + 8), _pair(buf, a + 11), _pair(buf, a + 14),
                        _pair(buf, a + 17))
    if a == b or _is_word(buf, a, b, missing, missing_ends):
        return EMPTY, 0
    year, i = _digits(buf, a, b, 4)
    if i != a + 4 or buf[i] != _DASH:
        return BAD, 0
    month, i = _part(buf, i, b, _DASH)
    day, i = _part(buf, i, b, tsep)
    hour, i = _part(buf, i, b, _COLON)
    minute, i = _part(buf, i, b, _COLON)
    second, i = _part(buf, i, b, -1)
    if i != b:
        return BAD, 0
    return _seconds(year, month, day, hour, minute, second)


@nb.njit(cache=True, nogil=True, inline="always")
def _pair(buf: npt.NDArray[np.uint8], i: int) -> int:
    """The two digits at ``buf[i]`` as a number, 100 or more when they are not digits."""
    high, low = _digit(buf, i), _digit(buf, i + 1)
    return int(high) * 10 + int(low) if high <= 9 and low <= 9 else 100


@nb.njit(cache=True, nogil=True)
def _seconds(year: int, month: int, day: int, hour: int, minute: int, second: int
             ) -> tuple[int, int]:
    """(status, seconds since 1970) of a date and time of day (year 0 to 9999), BAD if there
    is no such."""
    leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
    if year < 0 or not 1 <= month <= 12 or day < 1 or hour > 23 or minute > 59 or second > 59:
        return BAD, 0
    if day > (29 if leap else 28) if month == 2 else day > 30 + ((month + (month >> 3)) & 1):
        return BAD, 0
    # days from 1970-01-01 of a proleptic Gregorian date (H. Hinnant's days_from_civil), on
    # a year shifted by 400 (one era) so that every quantity is positive
    y = year + 400 - (1 if month <= 2 else 0)
    era = y // 400
    yoe = y - era * 400
    doy = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    days = (era - 1) * 146097 + doe - 719468
    return OK, days * 86400 + hour * 3600 + minute * 60 + second


@nb.njit(cache=True, nogil=True)
def _entries(buf: npt.NDArray[np.uint8], i: int, b: int) -> tuple[int, int, int]:
    """(end of the name, end of the entry, start of the next entry) of the TRES entry at
    ``buf[i]``; the name ends at its ``=`` (or with the entry, when it has none)."""
    eq = -1
    j = i
    while j < b and buf[uidx(j)] != _COMMA:
        if eq < 0 and buf[uidx(j)] == _EQ:
            eq = j
        j += 1
    return (eq if eq >= 0 else j), j, j + 1


@nb.njit(cache=True, nogil=True)
def tres_entry(buf: npt.NDArray[np.uint8], a: int, b: int, key: npt.NDArray[np.uint8]
               ) -> tuple[int, int, int]:
    """(status, value start, value end) of the first entry named ``key``; EMPTY if none."""
    i = a
    while i < b:
        name_end, end, nxt = _entries(buf, i, b)
        if name_end < end and name_end - i == len(key):
            same = True
            for j in range(len(key)):
                if buf[uidx(i + j)] != key[j]:
                    same = False
                    break
            if same:
                return OK, name_end + 1, end
        i = nxt
    return EMPTY, 0, 0


@nb.njit(cache=True, nogil=True)
def tres_gpu(buf: npt.NDArray[np.uint8], a: int, b: int) -> tuple[int, int, int, int, int]:
    """(status, type start, type end, count start, count end) of a TRES list's GPUs: the type
    of the first GPU entry (empty for ``gres/gpu=N``); the count of the ``gres/gpu=N`` entry,
    else of the first ``gres/gpu:TYPE=N``."""
    status, ta, tb, ca, cb = EMPTY, 0, 0, 0, 0
    i = a
    while i < b:
        name_end, end, nxt = _entries(buf, i, b)
        n = name_end - i
        if name_end < end and n >= len(_GPU):
            same = True
            for j in range(len(_GPU)):
                if buf[uidx(i + j)] != _GPU[j]:
                    same = False
                    break
            typed = same and n > len(_GPU) + 1 and buf[uidx(i + len(_GPU))] == _COLON
            if same and n == len(_GPU):  # gres/gpu=N: its count wins
                if status == EMPTY:
                    ta = tb = name_end
                return OK, ta, tb, name_end + 1, end
            if typed and status == EMPTY:
                status, ta, tb, ca, cb = OK, i + len(_GPU) + 1, name_end, name_end + 1, end
        i = nxt
    return status, ta, tb, ca, cb
