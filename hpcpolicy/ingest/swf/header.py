"""The header comments of an SWF log: ``; Key: value`` lines before the first job.

The Standard Workload Format (v2.2, https://www.cs.huji.ac.il/labs/parallel/workload/swf.html)
puts facts about the log in comment lines at its top. How they are read:

* a line ``; Key: value`` (a key of letters and digits, a colon, then a blank or the end)
  sets ``Key``; a key given again (``Note``, ``Queue``, ``Information``, ...) becomes a list;
* a comment line that is not ``Key: value`` (an indented ``;   http://...`` or the lines of
  a multi-line ``Note``) continues the previous key's text, joined with a space;
* keys whose value is a number (:data:`NUMERIC_KEYS`) are stored as ints. Text after the
  number is kept under ``<Key>_text``: ``; MaxNodes: 338 (batch partition; 512 total)``
  gives ``MaxNodes = 338`` and ``MaxNodes_text = "338 (batch partition; 512 total)"``;
* other values are kept as text; bytes that are not UTF-8 become U+FFFD.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from hpcpolicy.ingest.detect import head_text
from hpcpolicy.ingest.swf.columns import data_lines
from hpcpolicy.limits import Limits

__all__ = ["NUMERIC_KEYS", "numbered_names", "parse_header_lines", "read_head", "read_header"]

NUMERIC_KEYS = frozenset({
    "MaxJobs", "MaxRecords", "UnixStartTime", "TimeZone", "MaxNodes", "MaxProcs",
    "MaxRuntime", "MaxMemory", "MaxQueues", "MaxPartitions",
})
"""Header keys the SWF definition gives a number (a count, seconds, KB or a Unix time)."""

MAX_HEADER_BYTES = 1 << 20
"""Header comments read at most; a longer run of leading comments is cut (with a note)."""

_NUMBERED = re.compile(r"^\s*(\d+)\s+(\S.*?)\s*$")

_KEY_LINE = re.compile(r"^([A-Za-z][A-Za-z0-9_]*):(?:\s+(.*))?$")
_LEADING_INT = re.compile(r"^([-+]?\d+)(?:\.0*)?(?=\s|$)\s*(.*)$")


def _add(facts: dict[str, Any], key: str, value: Any) -> None:
    if key not in facts:
        facts[key] = value
    elif isinstance(facts[key], list):
        facts[key].append(value)
    else:
        facts[key] = [facts[key], value]


def _continue(facts: dict[str, Any], key: str, text: str) -> None:
    """Append ``text`` to the last value of ``key``."""
    value = facts[key]
    if isinstance(value, list):
        value[-1] = f"{value[-1]} {text}".strip()
    elif isinstance(value, str):
        facts[key] = f"{value} {text}".strip()
    else:  # a number followed by a continuation line: keep the words beside it
        facts[f"{key}_text"] = f"{facts.get(f'{key}_text', value)} {text}".strip()


def parse_header_lines(lines: list[str]) -> tuple[dict[str, Any], list[str]]:
    """Header facts from comment lines (``;`` included), and notes on what could not be read.

    Example:
        >>> facts, notes = parse_header_lines(["; MaxNodes: 338 (batch partition; 512 total)",
        ...                                    "; Note: cleaned", ";   by filter user=135"])
        >>> facts["MaxNodes"], facts["MaxNodes_text"], facts["Note"]
        (338, '338 (batch partition; 512 total)', 'cleaned by filter user=135')
    """
    facts: dict[str, Any] = {}
    notes: list[str] = []
    last: str | None = None
    for line in lines:
        text = line.strip().lstrip(";").strip()
        if not text:
            continue
        match = _KEY_LINE.match(text)
        if match is None:
            if last is not None:
                _continue(facts, last, text)
            continue
        key, value = match.group(1), (match.group(2) or "").strip()
        last = key
        if key in NUMERIC_KEYS:
            number = _LEADING_INT.match(value)
            if number is None:
                notes.append(f"header {key} {value!r} is not a number; kept as text")
                _add(facts, key, value)
                continue
            _add(facts, key, int(number.group(1)))
            if number.group(2):
                _add(facts, f"{key}_text", value)
            continue
        _add(facts, key, value)
    return facts, notes


def read_header(path: Path, limits: Limits | None = None) -> tuple[dict[str, Any], list[str]]:
    """Facts and notes from the comment lines at the top of ``path`` (plain or gzipped), as
    :func:`read_head` reads them."""
    facts, notes, _ = read_head(path, limits)
    return facts, notes


def read_head(path: Path, limits: Limits | None = None
              ) -> tuple[dict[str, Any], list[str], list[str]]:
    """Facts and notes from the comment lines at the top of ``path`` (plain or gzipped), and
    its first data lines (:data:`~hpcpolicy.ingest.swf.columns.SAMPLE_LINES` at most, fewer
    when the text read ends first).

    At most :data:`MAX_HEADER_BYTES` and one line more are read, whatever the lines hold (a
    line cut there is longer than the limit): a comment line longer than ``limits.line_bytes``
    (default :class:`Limits()`) is an error here, a longer data line is left to the scan.

    Raises:
        InputFormatError: the file cannot be read or decompressed, or a comment line is
            longer than ``limits.line_bytes``.
    """
    limits = limits or Limits()
    text = head_text(path, MAX_HEADER_BYTES + limits.line_bytes + 2)
    lines: list[str] = []
    size = 0
    notes: list[str] = []
    for number, line in enumerate(text.splitlines(keepends=True), 1):
        stripped = line.strip()
        if stripped and not stripped.startswith(";"):
            break
        if len(line.rstrip("\r\n").encode()) > limits.line_bytes:
            raise limits.line_error(str(path), number, "an SWF log's header")
        size += len(line.encode())
        if size > MAX_HEADER_BYTES:
            notes.append(f"only the first {MAX_HEADER_BYTES >> 20} MiB of header comments "
                         "were read")
            break
        lines.append(line)
    facts, parse_notes = parse_header_lines(lines)
    return facts, notes + parse_notes, data_lines(text.split("\n"))


def numbered_names(header: dict[str, Any], key: str) -> dict[str, str]:
    """The names that ``; Partition: 1 standard`` or ``; Queue: 2 debug`` lines give to the
    numbers of a job's partition or queue field, as ``{"1": "standard"}``; lines that are not
    a number then a name are left out.

    Example:
        >>> numbered_names({"Partition": ["1  DEFAULT", "2  ALL"]}, "Partition")
        {'1': 'DEFAULT', '2': 'ALL'}
    """
    values = header.get(key)
    found: dict[str, str] = {}
    for value in values if isinstance(values, list) else [values]:
        match = _NUMBERED.match(value) if isinstance(value, str) else None
        if match is not None:
            found[str(int(match[1]))] = match[2]
    return found
