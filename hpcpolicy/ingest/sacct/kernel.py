"""The compiled line scanner of sacct exports: sort each line out, copy job rows for Polars.

Most lines of an export are job steps (``123.batch``, ``123.extern``, ``123.0``: 70 % of the
lines swf2sacct writes for HPC2N), and a step needs nothing but its job id. Reading every line
into Polars strings only to drop the steps was most of the cost of reading sacct, so this Numba
kernel walks the bytes of a chunk of lines once (:mod:`hpcpolicy.ingest.text_chunks`) and:

* skips blank lines, lines before the first data row and repeats of the header;
* reads the job-id field (the ``id_index``-th field; CSV fields may be quoted) of each line: a
  ``.`` in it makes the line a step, whose job (the id up to the ``.``) must have a row. A step
  of the job row before it (the usual order) is only counted; any other step's job key is
  kept, to be looked up among all job rows once the file has been read;
* keeps a 128-bit key (two 64-bit hashes of the id text) of every job row, from which repeated
  records of a job (``sacct --duplicates``) are found once the file has been read;
* sorts each other line out, first rule that applies: ``non_utf8`` (bytes that are not
  UTF-8), ``field_count`` (not the layout's number of fields; for CSV also a field whose
  quoting is broken); else it is a job row to parse. A ``|`` row with too many fields, of a
  layout whose only free-text column (``name_index``) comes after the job id, is a job name
  holding ``|``: its extra fields are joined back into the name (code ``CODE_JOB_REJOINED``),
  as there is one way only to read it;
* writes, for each row Polars gets (job rows, rejected lines, and the orphan steps of a second
  pass), one line to ``out``: the row's raw text, then the fields in ``used`` (unquoted; only
  the job-id field for rejected rows), each followed by the separator ``sep``, then a newline.
  Polars' CSV reader splits that text without quote handling. ``sep`` and ``cr_sub`` are
  control bytes the text does not hold (the kernel stops before a line that holds one, for
  the caller to pick others); ``\\r`` is written as ``cr_sub`` (the CSV reader drops a ``\\r``
  before a separator) and put back by the caller. Bytes that are not UTF-8 are written as
  U+FFFD (:func:`hpcpolicy.ingest.utf8.copy_replacing`).

The kernel stops early when one of its output arrays is full; the caller hands it the rest.
"""

from __future__ import annotations

import numba as nb
import numpy as np
import numpy.typing as npt

from hpcpolicy.ingest.sacct.parse import EMPTY, OK, timestamp, tres_entry, tres_gpu, whole_number
from hpcpolicy.ingest.utf8 import copy_replacing, is_valid

__all__ = [
    "CODE_FIELD_COUNT", "CODE_JOB", "CODE_JOB_REJOINED", "CODE_NON_UTF8", "CODE_ORPHAN", "CSV",
    "ENTRY", "GPU", "INT", "LAYOUT_FIELDS", "MAX_REJOINED", "NONEMPTY", "PARSABLE", "PARSABLE2",
    "STATE_FIELDS", "TIME", "runs_of", "scan_chunk",
]

PARSABLE2, PARSABLE, CSV = 0, 1, 2
"""Styles (``sacct --parsable2``, ``--parsable`` with its trailing ``|``, CSV)."""
CODE_JOB, CODE_NON_UTF8, CODE_FIELD_COUNT, CODE_ORPHAN = 0, 1, 2, 3
CODE_JOB_REJOINED = 6
"""What a written row is: a job row to parse (one whose name held ``|``: rejoined), or a
line rejected by the scan."""
MAX_REJOINED = 64
"""Most ``|`` in one job name that are joined back; a row with more is ``field_count``."""
LAYOUT_FIELDS = ("style", "n_fields", "id_index", "first_row", "sep", "cr_sub", "tsep",
                 "name_index")
"""Order of the ``layout`` array handed to :func:`scan_chunk`."""
STATE_FIELDS = ("line", "orphan_at", "have_job", "job_h1", "job_h2")
"""Order of the ``state`` array (uint64) carried from one call to the next."""
ENTRY, GPU, NONEMPTY, INT, TIME = 1, 2, 3, 4, 5
"""Kinds of parsed outputs (:mod:`hpcpolicy.ingest.sacct.parse`): a TRES entry's value (text,
written like a field), the first TRES GPU entry (type and count, two texts), whether a field
is non-empty, a whole number and a timestamp (int64 in ``nums``). Each sets a status in
``flags``."""

_BAR, _COMMA, _QUOTE, _DOT, _NL, _CR = 124, 44, 34, 46, 10, 13
_ONES = np.uint64(0x0101010101010101)
_HIGH = np.uint64(0x8080808080808080)
_NLS = np.uint64(0x0A0A0A0A0A0A0A0A)
_FNV_OFFSET = np.uint64(0xCBF29CE484222325)
_FNV_PRIME = np.uint64(0x100000001B3)
_MIX1 = np.uint64(0xFF51AFD7ED558CCD)
_MIX2 = np.uint64(0xC4CEB9FE1A85EC53)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


@nb.njit(cache=True, nogil=True, inline="always")
def _u(i: int) -> np.uint64:
    """An index as unsigned: Numba then skips the negative-index wrap-around, which keeps
    LLVM from vectorising a loop (a copy runs 5x faster) and costs a test per byte."""
    return np.uint64(i)


def runs_of(used: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """(first, last) of each run of adjacent field indexes in ``used`` (ascending)."""
    breaks = np.flatnonzero(np.diff(used) != 1)
    firsts = np.concatenate([used[:1], used[breaks + 1]])
    lasts = np.concatenate([used[breaks], used[-1:]])
    return np.stack([firsts, lasts], axis=1).astype(np.int64).reshape(-1, 2)


@nb.njit(cache=True, nogil=True)
def _newline(buf: npt.NDArray[np.uint8], lanes: npt.NDArray[np.uint64], i: int, end: int) -> int:
    """Index of the first newline at or after ``i`` (``end`` if none), eight bytes at a time."""
    while i < end and i & 7:
        if buf[_u(i)] == _NL:
            return i
        i += 1
    w, last = i >> 3, end >> 3
    while w < last:
        v = lanes[_u(w)] ^ _NLS
        if (v - _ONES) & ~v & _HIGH:
            break
        w += 1
    i = max(i, w << 3)
    while i < end and buf[_u(i)] != _NL:
        i += 1
    return i


@nb.njit(cache=True, nogil=True)
def _fmix(h: np.uint64) -> np.uint64:
    h ^= h >> np.uint64(33)
    h *= _MIX1
    h ^= h >> np.uint64(33)
    h *= _MIX2
    h ^= h >> np.uint64(33)
    return h


@nb.njit(cache=True, nogil=True)
def _hash(buf: npt.NDArray[np.uint8], s: int, e: int, quoted: bool) -> tuple[np.uint64,
                                                                               np.uint64]:
    """Two independent 64-bit hashes of the text ``buf[s:e]`` (with ``""`` read as ``"``
    when ``quoted``)."""
    h1, h2 = _FNV_OFFSET, _GOLDEN
    n = np.uint64(0)
    i = s
    while i < e:
        c = np.uint64(buf[i])
        if quoted and buf[i] == _QUOTE:
            i += 1
        h1 = (h1 ^ c) * _FNV_PRIME
        h2 = (h2 + c) * _MIX1
        h2 ^= h2 >> np.uint64(29)
        n += np.uint64(1)
        i += 1
    return _fmix(h1 ^ n), _fmix(h2 + n)


@nb.njit(cache=True, nogil=True)
def _fields(buf: npt.NDArray[np.uint8], s: int, e: int, style: int, stop: int,
            bounds: npt.NDArray[np.int64]) -> tuple[int, int, bool, bool, int]:
    """Split ``buf[s:e]`` into fields, up to field ``stop`` (all with a negative ``stop``).

    ``bounds[k]`` receives (start, end, quoted) of field ``k`` for the fields it has room for.
    Returns (fields seen, position reached, broken CSV quoting, a byte >= 0x80 seen, mask of
    the control bytes seen).
    """
    cap = bounds.shape[0]
    k = 0
    i = s
    high = False
    ctrl = 0
    sep = _COMMA if style == CSV else _BAR
    while True:
        start = i
        quoted = False
        if style == CSV and i < e and buf[_u(i)] == _QUOTE:
            quoted = True
            i += 1
            start = i
            while True:
                if i >= e:
                    return k + 1, i, True, high, ctrl
                c = buf[_u(i)]
                if c == _QUOTE:
                    if i + 1 < e and buf[_u(i + 1)] == _QUOTE:
                        i += 2
                        continue
                    break
                if c >= 0x80:
                    high = True
                elif c < 32:
                    ctrl |= 1 << c
                i += 1
            stop_at = i
            i += 1
            if i < e and buf[_u(i)] != sep:
                return k + 1, i, True, high, ctrl
        else:
            while i < e:
                c = buf[_u(i)]
                if c == sep:
                    break
                if c >= 0x80:
                    high = True
                elif c < 32:
                    ctrl |= 1 << c
                elif style == CSV and c == _QUOTE:
                    return k + 1, i, True, high, ctrl
                i += 1
            stop_at = i
        if k < cap:
            bounds[k, 0] = start
            bounds[k, 1] = stop_at
            bounds[k, 2] = quoted
        k += 1
        if i >= e or k - 1 == stop:
            return k, i, False, high, ctrl
        i += 1  # the separator


@nb.njit(cache=True, nogil=True)
def _copy(buf: npt.NDArray[np.uint8], s: int, e: int, out: npt.NDArray[np.uint8], o: int,
          quoted: bool, utf8: bool, cr: bool, cr_sub: int) -> int:
    """Copy the text ``buf[s:e]`` to ``out[o:]``: ``""`` as ``"`` when ``quoted``, invalid
    UTF-8 as U+FFFD unless ``utf8``, ``\\r`` as ``cr_sub`` when ``cr``. Returns the new end."""
    if not utf8:
        end = copy_replacing(buf, s, e, out, o)
    elif quoted:
        end = o
        i = s
        while i < e:
            out[end] = buf[i]
            end += 1
            i += 2 if buf[i] == _QUOTE else 1
    else:
        # a loop (with unsigned indices, see _u) is vectorised; Numba's slice assignment
        # costs several times more on text this short
        for i in range(_u(e - s)):
            out[_u(o) + i] = buf[_u(s) + i]
        end = o + e - s
    if cr:
        for j in range(o, end):
            if out[j] == _CR:
                out[j] = cr_sub
    return end


@nb.njit(cache=True, nogil=True)
def _control_bytes(buf: npt.NDArray[np.uint8], s: int, e: int) -> int:
    ctrl = 0
    for i in range(s, e):
        if buf[i] < 32:
            ctrl |= 1 << buf[i]
    return ctrl


@nb.njit(cache=True, nogil=True)
def _write_row(buf: npt.NDArray[np.uint8], s: int, e: int, bounds: npt.NDArray[np.int64],
               n_bounds: int, used: npt.NDArray[np.int64], only: int, utf8: bool, cr: bool,
               sep: int, cr_sub: int, out: npt.NDArray[np.uint8], o: int) -> int:
    """Write the start of one row: raw text, the ``used`` fields (only field ``only`` when it
    is >= 0, and only the fields ``bounds`` holds), each followed by ``sep``."""
    o = _copy(buf, s, e, out, o, False, utf8, cr, cr_sub)
    out[o] = sep
    o += 1
    for j in range(len(used)):
        k = used[j]
        if k < n_bounds and (only < 0 or k == only):
            o = _copy(buf, bounds[k, 0], bounds[k, 1], out, o, bounds[k, 2] == 1, utf8, cr,
                      cr_sub)
        out[o] = sep
        o += 1
    return o


@nb.njit(cache=True, nogil=True)
def _write_plain_row(buf: npt.NDArray[np.uint8], s: int, e: int,
                     bounds: npt.NDArray[np.int64], runs: npt.NDArray[np.int64], sep: int,
                     out: npt.NDArray[np.uint8], o: int) -> int:
    """:func:`_write_row` for a valid job row of a ``|`` style without ``\\r``: each run of
    adjacent used fields (``runs``: first and last index) is copied at once, its ``|``
    turned into ``sep``."""
    o = _copy(buf, s, e, out, o, False, True, False, 0)
    out[o] = sep
    o += 1
    for r in range(len(runs)):
        first, last = runs[r, 0], runs[r, 1]
        a = bounds[first, 0]
        o = _copy(buf, a, bounds[last, 1], out, o, False, True, False, 0)
        for k in range(first, last):
            out[o - bounds[last, 1] + bounds[k, 1]] = sep
        out[o] = sep
        o += 1
    return o


@nb.njit(cache=True, nogil=True)
def _write_parsed(buf: npt.NDArray[np.uint8], bounds: npt.NDArray[np.int64], job: bool,
                  parsed: npt.NDArray[np.int64], words: npt.NDArray[np.uint8],
                  word_ends: npt.NDArray[np.int64], n_missing: int, tsep: int, cr: bool,
                  sep: int, cr_sub: int, out: npt.NDArray[np.uint8], o: int, row: int,
                  nums: npt.NDArray[np.int64], flags: npt.NDArray[np.uint8]) -> int:
    """The parsed outputs of one row (all empty unless ``job``): texts to ``out`` (each
    followed by ``sep``), numbers to ``nums[:, row]``, statuses to ``flags[:, row]``.

    ``parsed`` holds (field, kind, word) per output. ``words`` packs the ``n_missing`` words
    that mean "not known", then the TRES keys; word ``k`` ends at ``word_ends[k]``. An ENTRY
    output gives the number of its key's word."""
    n_num = 0
    for j in range(len(parsed)):
        f, kind, w = parsed[j, 0], parsed[j, 1], parsed[j, 2]
        a, b, q = bounds[f, 0], bounds[f, 1], bounds[f, 2] == 1
        status = EMPTY
        value = 0
        if kind == ENTRY:
            if job:
                status, va, vb = tres_entry(buf, a, b, words[word_ends[w - 1]:word_ends[w]])
                if status == OK:
                    o = _copy(buf, va, vb, out, o, q, True, cr, cr_sub)
            out[o] = sep
            o += 1
        elif kind == GPU:
            if job:
                status, ta, tb, ca, cb = tres_gpu(buf, a, b)
                if status == OK:
                    o = _copy(buf, ta, tb, out, o, q, True, cr, cr_sub)
            out[o] = sep
            o += 1
            if job and status == OK:
                o = _copy(buf, ca, cb, out, o, q, True, cr, cr_sub)
            out[o] = sep
            o += 1
        elif kind == NONEMPTY:
            status = OK if job and b > a else EMPTY
        elif job and kind == INT:
            status, value = whole_number(buf, a, b)
        elif job and kind == TIME:
            status, value = timestamp(buf, a, b, tsep, words, word_ends[:n_missing])
        if kind in (INT, TIME):
            nums[n_num, row] = value
            n_num += 1
        flags[j, row] = status
    return o


@nb.njit(cache=True, nogil=True)
def scan_chunk(
    buf: npt.NDArray[np.uint8],
    lanes: npt.NDArray[np.uint64],
    pos: int,
    end: int,
    layout: npt.NDArray[np.int64],
    header: npt.NDArray[np.uint8],
    used: npt.NDArray[np.int64],
    runs: npt.NDArray[np.int64],
    parsed: npt.NDArray[np.int64],
    words: npt.NDArray[np.uint8],
    word_ends: npt.NDArray[np.int64],
    n_missing: int,
    orphans: npt.NDArray[np.int64],
    state: npt.NDArray[np.uint64],
    out: npt.NDArray[np.uint8],
    o: int,
    line_no: npt.NDArray[np.int64],
    code: npt.NDArray[np.uint8],
    nums: npt.NDArray[np.int64],
    flags: npt.NDArray[np.uint8],
    keys: npt.NDArray[np.uint64],
    key_lines: npt.NDArray[np.int64],
    loose: npt.NDArray[np.uint64],
    loose_lines: npt.NDArray[np.int64],
) -> tuple[int, int, int, int, int, int, int, int]:
    """Scan the lines of ``buf[pos:end]`` (``lanes`` is ``buf`` seen as uint64).

    ``layout`` holds :data:`LAYOUT_FIELDS` (``id_index`` -1: no id column, every line a job
    row keyed by its whole text; ``tsep`` the byte between date and time); ``header`` the
    header line's bytes (empty: none); ``used`` the fields to write as text, ascending, and
    ``runs`` the same as (first, last) pairs of adjacent fields; ``parsed``, ``words``,
    ``word_ends`` and ``n_missing`` the parsed outputs (see :func:`_write_parsed`);
    ``orphans`` the sorted lines of steps found orphaned by a first pass (written as rows);
    ``state`` the :data:`STATE_FIELDS` carried between calls. Rows are written to ``out`` from
    ``o`` (line number and code of each in ``line_no``, ``code``, parsed numbers and statuses
    in ``nums`` and ``flags``); job keys go to ``keys``/``key_lines``, keys of steps that do
    not follow their job row to ``loose``/``loose_lines``.

    Returns (position reached, rows written, end in ``out``, job keys, loose step keys, steps
    folded, mask of the control bytes in the rows written, and -1, or the mask of the control
    bytes of the line it stopped at because it holds ``sep`` or ``cr_sub``).
    """
    style, n_fields, id_index, first_row, sep, cr_sub, tsep, name_index = (
        layout[0], layout[1], layout[2], layout[3], layout[4], layout[5], layout[6], layout[7])
    bounds = np.empty((n_fields + (MAX_REJOINED if name_index >= 0 else 0), 3), dtype=np.int64)
    widest = 2 * len(used) + 2 * len(parsed) + 4
    line = np.int64(state[0])
    orphan_at = np.int64(state[1])
    rows = n_keys = n_loose = folded = 0
    ctrl_out = 0
    clash = -1
    while pos < end and rows < len(line_no) and n_loose < len(loose_lines):
        s = pos
        e = _newline(buf, lanes, pos, end)
        le = e - 1 if e > s and buf[e - 1] == _CR else e
        if o + 6 * (le - s) + widest > len(out):
            break
        line += 1
        if line < first_row or le == s or (
                len(header) == le - s and np.array_equal(buf[s:le], header)):
            pos = e + 1
            continue
        stop = id_index if id_index >= 0 else -1
        nf, at, broken, high, ctrl = _fields(buf, s, le, style, stop, bounds)
        id_seen = id_index >= 0 and nf > id_index and not (broken and nf == id_index + 1)
        if id_seen:
            a, b, q = bounds[id_index, 0], bounds[id_index, 1], bounds[id_index, 2] == 1
            dot = a
            while dot < b and buf[dot] != _DOT:
                dot += 1
            if dot < b:  # a step: only its job key matters
                h1, h2 = _hash(buf, a, dot, q)
                if dot > a and state[2] == 1 and h1 == state[3] and h2 == state[4]:
                    folded += 1
                    pos = e + 1
                    continue
                while orphan_at < len(orphans) and orphans[orphan_at] < line:
                    orphan_at += 1
                orphan = orphan_at < len(orphans) and orphans[orphan_at] == line
                if orphan:
                    ctrl = _control_bytes(buf, s, le)
                    if (ctrl >> sep) & 1 or (ctrl >> cr_sub) & 1:
                        line -= 1
                        clash = ctrl
                        break
                    o = _write_row(buf, s, le, bounds, id_index + 1, used, id_index,
                                   is_valid(buf, s, le), (ctrl >> _CR) & 1 == 1, sep, cr_sub,
                                   out, o)
                    o = _write_parsed(buf, bounds, False, parsed, words, word_ends, n_missing,
                                      tsep, False, sep, cr_sub, out, o, rows, nums, flags)
                    out[o] = _NL
                    o += 1
                    ctrl_out |= ctrl
                    line_no[rows] = line
                    code[rows] = CODE_ORPHAN
                    rows += 1
                else:
                    folded += 1
                loose[n_loose, 0] = h1
                loose[n_loose, 1] = h2
                loose_lines[n_loose] = line
                n_loose += 1
                pos = e + 1
                continue
        if not broken and at < le:  # the rest of a job row
            nf2, at, broken, high2, ctrl2 = _fields(buf, at + 1, le, style, -1,
                                                    bounds[nf:])
            nf += nf2
            high |= high2
            ctrl |= ctrl2
        if (ctrl >> sep) & 1 or (ctrl >> cr_sub) & 1:
            line -= 1
            clash = ctrl
            break
        if id_index < 0:
            keys[n_keys, 0], keys[n_keys, 1] = _hash(buf, s, le, False)
            key_lines[n_keys] = line
            n_keys += 1
        elif id_seen and bounds[id_index, 1] > bounds[id_index, 0]:
            h1, h2 = _hash(buf, bounds[id_index, 0], bounds[id_index, 1],
                           bounds[id_index, 2] == 1)
            keys[n_keys, 0] = h1
            keys[n_keys, 1] = h2
            key_lines[n_keys] = line
            n_keys += 1
            state[2] = 1
            state[3] = h1
            state[4] = h2
        rejoined = (name_index >= 0 and not broken and n_fields < nf <= len(bounds)
                    and style != CSV)
        if rejoined:  # the name's field runs to where the extra fields end; the rest move up
            extra = nf - n_fields
            bounds[name_index, 1] = bounds[name_index + extra, 1]
            for k in range(name_index + 1, n_fields):
                bounds[k, 0] = bounds[k + extra, 0]
                bounds[k, 1] = bounds[k + extra, 1]
                bounds[k, 2] = bounds[k + extra, 2]
            nf = n_fields
        utf8 = not high or is_valid(buf, s, le)
        if not utf8:
            kind = CODE_NON_UTF8
        elif broken or nf != n_fields or (
                style == PARSABLE and bounds[nf - 1, 1] > bounds[nf - 1, 0]):
            kind = CODE_FIELD_COUNT
        else:
            kind = CODE_JOB
        cr = (ctrl >> _CR) & 1 == 1
        job = kind == CODE_JOB
        if job and rejoined:
            kind = CODE_JOB_REJOINED
        if job and style != CSV and not cr:
            o = _write_plain_row(buf, s, le, bounds, runs, sep, out, o)
        elif job:
            o = _write_row(buf, s, le, bounds, n_fields, used, -1, True, cr, sep, cr_sub, out,
                           o)
        else:  # the raw text, and the job id when the line has one
            o = _write_row(buf, s, le, bounds, id_index + 1 if id_seen else 0, used, id_index,
                           utf8, cr, sep, cr_sub, out, o)
        o = _write_parsed(buf, bounds, job, parsed, words, word_ends, n_missing,
                          tsep, cr, sep, cr_sub, out, o, rows, nums, flags)
        out[o] = _NL
        o += 1
        ctrl_out |= ctrl
        line_no[rows] = line
        code[rows] = kind
        rows += 1
        pos = e + 1
    state[0] = line
    state[1] = orphan_at
    return pos, rows, o, n_keys, n_loose, folded, ctrl_out, clash
