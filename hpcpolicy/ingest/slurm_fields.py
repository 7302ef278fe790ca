"""Polars expressions that parse the text of single Slurm ``sacct`` fields.

Parsing comes in two steps so that no expensive operation runs twice: a *leaf* expression
(``to_int``, ``size_parts``, ``duration_parts``, ``job_id_parts``, ...) reads the text once
and is stored as a column; cheap *finishing* expressions (``size_mib``, ``duration_s``, ...)
combine stored columns. Words that mean "not known" (``Unknown``, ``None``, empty) are null,
never errors. No Python runs per row. Whole-number columns, timestamps and TRES lists are
parsed by the scan instead (:mod:`hpcpolicy.ingest.sacct.parse`); :func:`to_utc` places the
timestamps it reads in time.

Example:
    >>> import polars as pl
    >>> df = pl.DataFrame({"t": ["1-02:03:04", "05:06", "UNLIMITED", "soon"]})
    >>> parts = df.select(p=duration_parts(pl.col("t")), t=pl.col("t"))
    >>> parts.select(s=duration_s(pl.col("p")), bad=duration_bad(pl.col("p"), pl.col("t"))).rows()
    [(93784, False), (306, False), (None, False), (None, True)]
"""

from __future__ import annotations

import re
from typing import Any

import polars as pl

__all__ = [
    "MAX_COUNT",
    "MAX_DURATION_S",
    "MAX_MEM_MIB",
    "MISSING",
    "STATES",
    "TIME_FORMATS",
    "UNSET_DURATIONS",
    "duration_bad",
    "duration_parts",
    "duration_s",
    "duration_seconds",
    "exit_status",
    "first_of",
    "has_text",
    "is_ambiguous_local",
    "is_present",
    "is_unset_duration",
    "job_id_parts",
    "lookup",
    "size_mib",
    "size_parts",
    "state_of",
    "text",
    "to_int",
    "to_utc",
]

MAX_COUNT = 10_000_000
"""Largest plausible CPU, node or GPU count of one job; larger ones are ``absurd_value``."""
MAX_MEM_MIB = 1 << 40
"""Largest plausible memory request of one job (1 EiB in MiB)."""
MAX_DURATION_S = 100 * 366 * 86400
"""Largest plausible duration (100 years)."""

MISSING = ("", "Unknown", "None", "None assigned", "N/A", "(null)")
"""Field texts meaning "not known"."""
UNSET_DURATIONS = ("UNLIMITED", "Partition_Limit", "INVALID", "NONE")
"""Duration words meaning "no per-job value": null, not an error."""

TIME_FORMATS = {
    "iso": "%Y-%m-%dT%H:%M:%S",
    "space": "%Y-%m-%d %H:%M:%S",
}
"""Timestamp layouts sacct prints: the default (``SLURM_TIME_FORMAT=standard``) and the same
with a space, as some sites configure."""

STATES: dict[str, str] = {
    "COMPLETED": "completed", "CD": "completed",
    "FAILED": "failed", "F": "failed", "SPECIAL_EXIT": "failed", "SE": "failed",
    "CANCELLED": "cancelled", "CA": "cancelled", "REVOKED": "cancelled", "RV": "cancelled",
    "TIMEOUT": "timeout", "TO": "timeout", "DEADLINE": "timeout", "DL": "timeout",
    "NODE_FAIL": "node_fail", "NF": "node_fail", "BOOT_FAIL": "node_fail", "BF": "node_fail",
    "OUT_OF_MEMORY": "oom", "OOM": "oom",
    "PREEMPTED": "preempted", "PR": "preempted",
    "PENDING": "pending", "PD": "pending", "REQUEUED": "pending", "RQ": "pending",
    "REQUEUE_HOLD": "pending", "REQUEUE_FED": "pending", "RESV_DEL_HOLD": "pending",
    "RUNNING": "running", "R": "running", "SUSPENDED": "running", "S": "running",
    "RESIZING": "running", "STOPPED": "running", "ST": "running", "COMPLETING": "running",
    "CG": "running", "CONFIGURING": "running", "CF": "running", "SIGNALING": "running",
    "STAGE_OUT": "running",
    "UNKNOWN": "unknown",
}
"""Slurm job state (first word of ``State``: ``CANCELLED by 1234`` is ``CANCELLED``) -> the
job table's state. Requeued and held jobs wait again (pending); suspended, stopped and
completing jobs have not ended (running); ``BOOT_FAIL`` is a node failure and ``DEADLINE`` a
time limit. Other words are not in the table (``state_of`` gives null)."""

_UNIT_MIB = {"": 1.0, "K": 1 / 1024, "M": 1.0, "G": 1024.0, "T": 1024.0**2, "P": 1024.0**3}


def first_of(cases: list[tuple[pl.Expr, object]]) -> pl.Expr:
    """The value of the first case whose condition is True, else null (a ``when`` chain)."""
    chain: Any = pl
    for cond, value in cases:
        chain = chain.when(cond).then(value if isinstance(value, pl.Expr) else pl.lit(value))
    return chain.otherwise(None)  # type: ignore[no-any-return]


def lookup(t: pl.Expr, mapping: dict[str, object]) -> pl.Expr:
    """``mapping[t]``, null for keys not in it, as a ``when`` chain over the distinct values.

    Polars' ``replace_strict`` would leave the streaming engine (it is not evaluated row by
    row), so small fixed tables are mapped this way instead.
    """
    by_value: dict[object, list[str]] = {}
    for key, value in mapping.items():
        by_value.setdefault(value, []).append(key)
    return first_of([(t.is_in(keys), value) for value, keys in by_value.items()])


def is_present(t: pl.Expr) -> pl.Expr:
    """True where the text holds a value (not null, empty or a "not known" word)."""
    return t.is_not_null() & ~t.is_in(MISSING)


def has_text(t: pl.Expr) -> pl.Expr:
    """True where the field is not empty (numeric fields have no "not known" words)."""
    return t.str.len_bytes() > 0


def text(t: pl.Expr, missing: tuple[str, ...] = ("",)) -> pl.Expr:
    """A free-text field, null where it is one of ``missing`` (by default only empty)."""
    empty = t.str.len_bytes() == 0
    return pl.when(~(empty | t.is_in(missing)) if missing != ("",) else ~empty).then(t)


def to_int(t: pl.Expr) -> pl.Expr:
    """Leaf: a whole number (``ReqCPUS``, ``ElapsedRaw``, ...), null if it does not parse."""
    return t.cast(pl.Int64, strict=False)


def to_utc(naive: pl.Expr, tz: str) -> pl.Expr:
    """A zone-less datetime (the wall-clock time in zone ``tz``) as a UTC datetime.

    Local times a clock change makes ambiguous take the earlier instant; times a clock change
    skips are null (and so rejected as bad timestamps).
    """
    if tz == "UTC":
        return naive.dt.replace_time_zone("UTC")
    local = naive.dt.replace_time_zone(tz, ambiguous="earliest", non_existent="null")
    return local.dt.convert_time_zone("UTC")


def is_ambiguous_local(naive: pl.Expr, tz: str) -> pl.Expr:
    """True where a zone-less datetime falls in the repeated hour of a clock change in ``tz``."""
    early = naive.dt.replace_time_zone(tz, ambiguous="earliest", non_existent="null")
    late = naive.dt.replace_time_zone(tz, ambiguous="latest", non_existent="null")
    return (early != late).fill_null(False)


_DURATION = r"^(?:([0-9]+)-)?([0-9]+)(?::([0-9]+))?(?::([0-9]+))?(?:\.[0-9]*)?$"


def duration_parts(t: pl.Expr) -> pl.Expr:
    """Leaf: a duration's numbers as a struct (days, then up to three ``:`` parts)."""
    return t.str.extract_groups(_DURATION)


def duration_s(parts: pl.Expr) -> pl.Expr:
    """Seconds from :func:`duration_parts`, fractions dropped.

    ``D-HH:MM:SS``, ``D-HH:MM``, ``D-HH``, ``HH:MM:SS``, ``MM:SS`` and ``MM`` (the forms Slurm
    prints and accepts); null for anything else.
    """
    days, p1, p2, p3 = (parts.struct.field(str(i)).cast(pl.Int64) for i in (1, 2, 3, 4))
    return (
        pl.when(days.is_not_null())
        .then(days * 86400 + p1 * 3600 + p2.fill_null(0) * 60 + p3.fill_null(0))
        .when(p3.is_not_null()).then(p1 * 3600 + p2 * 60 + p3)
        .when(p2.is_not_null()).then(p1 * 60 + p2)
        .otherwise(p1 * 60)
    )


def duration_seconds(text: str) -> int | None:
    """Seconds of one duration text read as :func:`duration_s` reads a column (same pattern,
    same forms), for a value outside a table; None where it does not parse.

    >>> duration_seconds("1-02:03:04"), duration_seconds("05:06"), duration_seconds("soon")
    (93784, 306, None)
    """
    found = re.match(_DURATION, text)
    if found is None:
        return None
    p1 = int(found.group(2))  # the one part the pattern requires
    days, p2, p3 = (None if g is None else int(g) for g in found.group(1, 3, 4))
    if days is not None:
        return days * 86400 + p1 * 3600 + (p2 or 0) * 60 + (p3 or 0)
    if p3 is not None:
        return p1 * 3600 + (p2 or 0) * 60 + p3
    return p1 * 60 + p2 if p2 is not None else p1 * 60


def duration_bad(parts: pl.Expr, t: pl.Expr) -> pl.Expr:
    """True where a duration text is present, not an unset word, and does not parse."""
    return parts.struct.field("2").is_null() & is_present(t) & ~t.is_in(UNSET_DURATIONS)


def is_unset_duration(t: pl.Expr) -> pl.Expr:
    """True where a duration field says there is no per-job value (``UNLIMITED``, ...)."""
    return t.is_in(UNSET_DURATIONS).fill_null(False)


_SIZE = r"([0-9]+(?:\.[0-9]+)?)([KMGTP]?)([cn]?)"


def size_parts(t: pl.Expr) -> pl.Expr:
    """Leaf: a memory size (``4000``, ``4000Mc``, ``64Gn``, ``1.50T``) as a struct of its
    number (field ``1``), unit (``2``) and per-CPU ``c`` / per-node ``n`` suffix (``3``)."""
    return t.str.extract_groups(f"^{_SIZE}$")


def size_mib(parts: pl.Expr, cpus: pl.Expr, nodes: pl.Expr) -> pl.Expr:
    """Total MiB (float) from :func:`size_parts`: times ``cpus`` for ``c``, times ``nodes``
    for ``n`` (Slurm before 21.08 printed ``ReqMem`` per CPU or per node); a bare number is
    MiB. Null where the text did not parse."""
    number = parts.struct.field("1").cast(pl.Float64)
    factor = lookup(parts.struct.field("2"), _UNIT_MIB)  # type: ignore[arg-type]
    per = parts.struct.field("3")
    size = number * factor
    return pl.when(per == "c").then(size * cpus).when(per == "n").then(size * nodes).otherwise(size)


_STATE_KEYS = sorted(STATES, key=lambda word: (list(STATES.values()).index(STATES[word]), word))
_STATE_ENUM = pl.Enum(_STATE_KEYS)


def state_of(t: pl.Expr) -> pl.Expr:
    """Leaf: the job-table state of a ``State`` text; null for words not in :data:`STATES`.

    The first word is cast to an enum whose codes are grouped by target state, so the
    mapping is a few integer comparisons per row.
    """
    code = t.str.splitn(" ", 2).struct.field("field_0").cast(_STATE_ENUM, strict=False)
    code = code.to_physical()
    targets = list(dict.fromkeys(STATES.values()))
    ends = [sum(1 for v in STATES.values() if targets.index(v) <= i) for i in range(len(targets))]
    return first_of([(code < end, target) for end, target in zip(ends, targets, strict=True)])


def exit_status(t: pl.Expr) -> pl.Expr:
    """Leaf: the exit status from ``ExitCode`` (``1:0`` -> 1; after ``:`` is the signal)."""
    return t.str.splitn(":", 2).struct.field("field_0").cast(pl.Int64, strict=False)


def job_id_parts(t: pl.Expr) -> pl.Expr:
    """Leaf: a printed job id as a struct of text fields: ``1`` the leading number, ``2`` the
    array task (``123_4``), ``3`` the bracketed range of a pending array (``123_[5-9%2]``),
    ``4`` the heterogeneous component (``123+1``); all null when it matches none of these."""
    return t.str.extract_groups(r"^([0-9]+)(?:_([0-9]+)|_(\[[^\]]*\])|\+([0-9]+))?$")
