"""How many fields an SWF log's data lines have: the 18 standard ones, or more.

Some simulators append columns after SWF field 18 (a node specification, a queue name, node
properties), possibly text. Such a file is *extended*; a standard file with an odd line of
19 fields is *damaged* there. The rule that tells them apart, applied to the first
:data:`SAMPLE_LINES` data lines (lines that are neither blank nor ``;`` comments):

* a line is *wide* with ``n`` fields when it has ``n > 18`` blank-separated fields and its
  first 18 are decimal numbers (optional sign, digits, optional fraction);
* the file is extended with ``n - 18`` extra columns when more than half of the sampled data
  lines are wide with the same ``n``; otherwise it is standard.

In an extended file each line needs at least 18 fields, of which only the first 18 are read
(and must be numbers); in a standard file a line needs exactly 18. A line with fewer than 18
fields is a ``field_count`` reject either way.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable

__all__ = ["N_FIELDS", "SAMPLE_LINES", "data_lines", "extra_columns", "numeric_fields"]

N_FIELDS = 18
"""Fields of a standard SWF data line."""
SAMPLE_LINES = 20
"""Data lines at the top of a file that decide whether it is extended."""
_NUMBER = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)")
_BLANKS = " \t\r\x0b\x0c"
"""What separates fields, as the scan reads them."""
_SPLIT = re.compile(f"[{_BLANKS}]+")


def numeric_fields(line: str) -> int | None:
    """The number of blank-separated fields of ``line`` when it has at least 18 and its first
    18 are numbers, else None.

    Example:
        >>> numeric_fields("1 0 5 60 4 -1 -1 4 100 -1 1 1 1 -1 1 -1 -1 -1 n[1-4] batch")
        20
    """
    fields = _SPLIT.split(line.strip(_BLANKS))
    if len(fields) < N_FIELDS or not all(_NUMBER.fullmatch(f) for f in fields[:N_FIELDS]):
        return None
    return len(fields)


def data_lines(lines: Iterable[str]) -> list[str]:
    """The first :data:`SAMPLE_LINES` of ``lines`` that are neither blank nor comments."""
    found = []
    for line in lines:
        text = line.lstrip(_BLANKS)
        if text.strip(_BLANKS) and not text.startswith(";"):
            found.append(line)
            if len(found) == SAMPLE_LINES:
                break
    return found


def extra_columns(lines: Iterable[str]) -> int:
    """Columns after field 18 that make the file extended, judged from the first
    :data:`SAMPLE_LINES` data lines of ``lines`` (split at newlines only, as the scan splits
    them) by the rule above; 0 for a standard file.

    Example:
        >>> extra_columns(["; a comment", "1 0 5 60 4 -1 -1 4 100 -1 1 1 1 -1 1 -1 -1 -1 q"])
        1
    """
    sample = data_lines(lines)
    counts = Counter(numeric_fields(ln) for ln in sample)
    counts.pop(None, None)
    if not counts:
        return 0
    width, seen = counts.most_common(1)[0]
    assert width is not None
    return width - N_FIELDS if width > N_FIELDS and 2 * seen > len(sample) else 0
