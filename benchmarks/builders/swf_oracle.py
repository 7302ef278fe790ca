"""The documented verdict on each line of an SWF file, in plain Python (regex and ``float``):
the oracle of the SWF reader's property test (tests/test_ingest_swf_props.py) and of the
readers' fuzzer (:mod:`benchmarks.builders.reader_fuzz`), written apart from the compiled
scanner (:mod:`hpcpolicy.ingest.swf.scan`) it checks."""

from __future__ import annotations

import re
from collections import Counter
from decimal import Decimal

HEADER = b"; MaxProcs: 64\n; UnixStartTime: 0\n"
HEADER_LINES = 2
SKIP = "not a row"
BLANKS = rb"[ \t\r\x0b\x0c]"
NUMBER = re.compile(rb"[+-]?(\d+\.?\d*|\.\d+)")
SECONDS, PROCS, BIG, ID = 1e10, 1e8, 1e12, 10**18 - 1
LIMIT = [BIG, SECONDS, SECONDS, SECONDS, PROCS, SECONDS, BIG, PROCS, SECONDS, BIG, 5, ID, ID,
         ID, ID, ID, BIG, SECONDS]


def _tokens(line: bytes) -> list[bytes]:
    return [t for t in re.split(BLANKS, line) if t]


def is_row(line: bytes) -> bool:
    """A data line: not blank, not a ``;`` comment."""
    text = line.lstrip(b" \t\r\x0b\x0c")
    return bool(text.strip(b" \t\r\x0b\x0c")) and not text.startswith(b";")


def extended(lines: list[bytes]) -> bool:
    """The documented rule: more than half of the first 20 data lines have the same number of
    fields, above 18, with 18 numbers first."""
    sample = [ln for ln in lines if is_row(ln)][:20]
    wide = Counter(len(t) for t in map(_tokens, sample)
                   if len(t) > 18 and all(NUMBER.fullmatch(f) for f in t[:18]))
    return bool(wide) and 2 * wide.most_common(1)[0][1] > len(sample)


def verdict(line: bytes, wide: bool = False) -> str | None:
    """The documented verdict on one line of a standard (or, ``wide``, an extended) file:
    SKIP, None (kept), step_folded or a reject code."""
    if not is_row(line):
        return SKIP
    tokens = _tokens(line)
    try:
        (b" ".join(tokens[:18]) if wide else line).decode("utf-8")
    except UnicodeDecodeError:
        return "non_utf8"
    if len(tokens) < 18 or (len(tokens) > 18 and not wide):
        return "field_count"
    tokens = tokens[:18]
    if not all(NUMBER.fullmatch(t) for t in tokens):
        return "bad_number"
    v = [float(t) for t in tokens]
    if v[0] == -1 or not v[0].is_integer():
        return "no_job_id"
    if v[1] == -1:
        return "no_submit_time"
    if not v[10].is_integer() or not -1 <= v[10] <= 5:
        return "swf_bad_status"
    if not all(x.is_integer() for x in v[11:17]):
        return "swf_fractional_id"
    if any(Decimal(t.decode()) > ID for t in tokens[11:16]):
        return "swf_long_id"
    if any((x < 0 and x != -1) or x > lim for x, lim in zip(v, LIMIT, strict=True)):
        return "absurd_value"
    if v[10] in (2, 3, 4):  # a partial execution, folded into its job's summary line
        return "step_folded"
    return None
