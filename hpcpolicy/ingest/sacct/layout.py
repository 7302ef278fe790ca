"""How a Slurm ``sacct`` export is laid out: separator, header, columns, time format.

Read from the first 64 KiB of the file (more when a wider header is allowed), before any row
is parsed, so that a wrong delimiter, a missing column, a header wider than the limits or an
unknown time format is reported at once in one line.

Example:
    >>> import pathlib, tempfile
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "sacct.txt"
    >>> _ = p.write_text("JobID|User|Submit|State\\n7|ann|2024-03-01T10:00:00|COMPLETED\\n")
    >>> layout = read_layout(p)
    >>> layout.index("Submit"), layout.style
    (2, 'parsable2')
"""

from __future__ import annotations

import csv
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from hpcpolicy.errors import InputFormatError
from hpcpolicy.ingest.detect import SACCT_EXPORT, head_text
from hpcpolicy.ingest.slurm_fields import TIME_FORMATS
from hpcpolicy.limits import Limits

__all__ = ["EXPORT_COMMAND", "KNOWN_FIELDS", "RECOMMENDED_FORMAT", "REQUIRED", "SacctLayout",
           "read_layout"]

RECOMMENDED_FORMAT = (
    "JobID,JobIDRaw,JobName,User,Group,Account,Partition,QOS,Submit,Eligible,Start,End,"
    "Elapsed,Timelimit,State,ExitCode,NNodes,NCPUS,ReqCPUS,ReqNodes,ReqMem,ReqTRES,AllocTRES,"
    "NodeList"
)
"""The ``--format`` list that gives every column of the job table."""
EXPORT_COMMAND = f"{SACCT_EXPORT} --format={RECOMMENDED_FORMAT}"
"""The whole export command, for messages."""

_HEAD_BYTES = 1 << 16
"""Bytes read from the start of the file for the header and the rows that show the time
format."""

REQUIRED = ("Submit", "State")
"""Columns without which no job can be placed in time or given a final state."""

KNOWN_FIELDS = frozenset(
    name.lower()
    for name in (
        *RECOMMENDED_FORMAT.split(","),
        "Account", "AdminComment", "AllocCPUS", "AllocNodes", "AllocTRES", "AssocID", "AveCPU",
        "AveRSS", "AveVMSize", "Cluster", "Comment", "Constraints", "ConsumedEnergy",
        "ConsumedEnergyRaw", "CPUTime", "CPUTimeRAW", "DBIndex", "DerivedExitCode",
        "ElapsedRaw", "Flags", "GID", "Layout", "MaxRSS", "MaxVMSize", "NTasks", "Priority",
        "QOSRAW", "Reason", "ReqCPUFreq", "Reservation", "ReservationId", "Reserved",
        "ResvCPU", "ResvCPURAW", "Suspended", "SystemCPU", "TimelimitRaw", "TotalCPU", "UID",
        "UserCPU", "WCKey", "WCKeyID", "WorkDir", "SubmitLine", "ReqGRES", "AllocGRES",
        "ArrayJobID", "ArrayTaskID", "HetJobID", "HetJobOffset", "Planned", "PlannedCPU",
    )
)
"""Lower-cased sacct field names that mark a line as a header."""

_DATA_TOKEN = re.compile(r"^[0-9][0-9_.+:\[\]-]*$")


@dataclass(frozen=True)
class SacctLayout:
    """Where each field sits in a line of one export."""

    columns: tuple[str, ...]
    """Column names in file order, as the header (or ``--sacct-columns``) spells them."""
    style: str
    """``parsable2`` (``|``, no trailing ``|``), ``parsable`` (trailing ``|``) or ``csv``."""
    header_line: str | None
    """The header's exact text (repeated headers of concatenated exports are skipped), or
    None for a header-less file."""
    first_row: int
    """1-based line number of the first data row."""
    time_format: str
    """Key of :data:`hpcpolicy.ingest.slurm_fields.TIME_FORMATS` the timestamps use."""

    @property
    def separator(self) -> str:
        """The field separator: ``|`` or ``,``."""
        return "," if self.style == "csv" else "|"

    @property
    def n_fields(self) -> int:
        """Fields per line, counting the empty one after a trailing ``|``."""
        return len(self.columns) + (self.style == "parsable")

    def index(self, name: str) -> int | None:
        """Position of the (case-insensitive) column ``name``; the first one if repeated."""
        low = name.lower()
        for i, col in enumerate(self.columns):
            if col.lower() == low:
                return i
        return None

    def has(self, *names: str) -> bool:
        """Whether every one of ``names`` is a column."""
        return all(self.index(n) is not None for n in names)


def _split(line: str, style: str) -> list[str]:
    if style == "csv":
        return next(csv.reader([line]))
    fields = line.split("|")
    return fields[:-1] if style == "parsable" else fields


def _style_of(line: str) -> str | None:
    """The style a header or data line suggests, or None when it has no ``|`` or ``,``."""
    if "|" in line:
        return "parsable" if line.endswith("|") else "parsable2"
    return "csv" if "," in line else None


def _is_header(tokens: Sequence[str]) -> bool:
    known = sum(t.strip().lower() in KNOWN_FIELDS for t in tokens)
    return known >= 2 and not any(_DATA_TOKEN.match(t.strip()) for t in tokens)


def _wrong_separator(path: Path, line: str) -> InputFormatError:
    for sep, name in ((";", "';'"), ("\t", "tabs"), (" ", "spaces")):
        if _is_header(line.split(sep)):
            return InputFormatError(
                f"{path}:1: the header is separated by {name}; sacct exports use '|' "
                f"(sacct --parsable2) or ','; re-export with `{EXPORT_COMMAND}`"
            )
    return InputFormatError(
        f"{path}:1: no '|' or ',' separated sacct header in {line[:60]!r}; export with "
        f"`{EXPORT_COMMAND}` (or give the columns of a "
        "header-less export with --sacct-columns)"
    )


def _time_format(path: Path, layout_cols: tuple[str, ...], style: str,
                 rows: list[tuple[int, str]]) -> str:
    """Which :data:`TIME_FORMATS` entry the first rows' ``Submit`` values use.

    Raises:
        InputFormatError: ten or more sampled values and none in a known form (a few odd
            values are left to be rejected row by row as ``bad_timestamp``).
    """
    at = [c.lower() for c in layout_cols].index("submit")
    seen: list[tuple[int, str]] = []
    for lineno, line in rows:
        try:
            fields = _split(line, style)
        except csv.Error:
            continue
        value = fields[at].strip() if len(fields) == len(layout_cols) else ""
        if value in ("", "Unknown", "None"):
            continue
        for key, fmt in TIME_FORMATS.items():
            try:
                datetime.strptime(value, fmt)
            except ValueError:
                continue
            return key
        seen.append((lineno, value))
    if len(seen) >= 10:
        lineno, value = seen[0]
        raise InputFormatError(
            f"{path}:{lineno}: column Submit holds {value[:40]!r}, not a timestamp like "
            "2024-01-31T23:59:59; export with SLURM_TIME_FORMAT=standard"
        )
    return "iso"


def read_layout(path: Path, columns: Sequence[str] | None = None,
                limits: Limits | None = None) -> SacctLayout:
    """The layout of the sacct export at ``path``.

    Args:
        path: a sacct export, plain or gzipped.
        columns: column names of a header-less export (the ``--format`` list it was made
            with); ignored when the file has a header.
        limits: the widest header accepted (default :class:`Limits()`).

    Raises:
        InputFormatError: the separator is not ``|`` or ``,``; the file has no header and no
            ``columns`` were given; the header is wider than ``limits`` allow; a required
            column is missing; timestamps are in a form sacct does not print by default.
    """
    limits = limits or Limits()
    text = head_text(path, max(_HEAD_BYTES, limits.header_bytes + 1))
    numbered = [(i, ln.rstrip("\r")) for i, ln in enumerate(text.split("\n")[:-1] or
                                                            text.split("\n"), 1)]
    numbered = [(i, ln) for i, ln in numbered if ln.strip()]
    first_no, first = numbered[0]
    if not columns and len(first.encode()) > limits.header_bytes:
        raise limits.header_error(str(path), first_no)
    style = _style_of(first)
    if style is None:
        raise _wrong_separator(path, first)
    tokens = _split(first, style)
    limits.check_columns(len(tokens), str(path), first_no)
    if _is_header(tokens):
        cols, header_line, first_row = tuple(t.strip() for t in tokens), first, first_no + 1
    elif columns:
        cols, header_line, first_row = tuple(columns), None, first_no
    else:
        raise InputFormatError(
            f"{path}:{first_no}: no header line (expected sacct field names such as "
            "JobID|Submit|State); export without --noheader, or give the columns with "
            "--sacct-columns JobID,Submit,... in the order of the export's --format list"
        )
    missing = [name for name in REQUIRED if name.lower() not in {c.lower() for c in cols}]
    if missing:
        raise InputFormatError(
            f"{path}: column{'s' if len(missing) > 1 else ''} {', '.join(missing)} missing "
            f"(found {', '.join(cols[:12])}{', ...' if len(cols) > 12 else ''}); export with "
            f"`{EXPORT_COMMAND}`"
        )
    data_style = "csv" if style == "csv" else ("parsable" if first.endswith("|") else "parsable2")
    rows = [(i, ln) for i, ln in numbered if i >= first_row][:200]
    fmt = _time_format(path, cols, data_style, rows)
    return SacctLayout(columns=cols, style=data_style, header_line=header_line,
                       first_row=first_row, time_format=fmt)
