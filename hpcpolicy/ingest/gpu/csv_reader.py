"""Typed values, reject checks and repair flags from the text columns of a GPU trace.

The GPU-trace readers (:mod:`hpcpolicy.ingest.gpu.alibaba`, :mod:`hpcpolicy.ingest.gpu.jobs`)
parse the text columns of :func:`hpcpolicy.ingest.csv_scan.scan_csv` through one
:class:`Fields`: each parse also registers the check that rejects a row whose text does not
parse (``bad_number``, ``bad_timestamp``) or holds an impossible value (``absurd_value``).
:meth:`Fields.finish` then builds the reader's frame: every canonical column, the internal
columns, and a ``_reason`` that names the first failed check in :data:`CHECKS` order.

Texts that mean "not known" (:data:`MISSING_WORDS`: empty, ``None``, ``nan``, ``NA``, ...,
as Python and pandas write missing values) are null, never errors.

Example:
    >>> import polars as pl
    >>> f = Fields()
    >>> n = f.whole("n", high=10)
    >>> df = pl.LazyFrame({"n": ["3", "x", "99", "nan"], "_reason": [None] * 4})
    >>> f.parse(df).select(n, f.reason()).collect().rows()
    [(3, None), (None, 'bad_number'), (99, 'absurd_value'), (None, None)]
"""

from __future__ import annotations

import polars as pl

from hpcpolicy.ingest import slurm_fields as sf
from hpcpolicy.ingest.plan import REPAIR_PREFIX
from hpcpolicy.schema import JOB_COLUMNS

__all__ = ["CHECKS", "MISSING_WORDS", "TIME_FORMATS", "Fields"]

MISSING_WORDS = ("", "None", "none", "nan", "NaN", "NA", "N/A", "null", "NULL")
"""Field texts meaning "not known"."""

TIME_FORMATS = ("%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H:%M:%S")
"""Timestamp layouts read from text columns (Helios and Philly write the first)."""

CHECKS = (
    "non_utf8", "field_count", "no_job_id", "no_submit_time", "bad_timestamp", "bad_number",
    "bad_state", "bad_gpu_share", "absurd_value", "end_before_start", "start_before_submit",
)
"""Reject checks in the order they are applied: the first that fails names the reason (the
first two come from the scan)."""


class Fields:
    """Parses text columns and collects the checks and repairs the parses imply.

    Each parse is stored once as a column (``_p_<column>``, then ``_u_<column>`` for a time
    placed in UTC) and the returned expressions refer to it: a value used in several
    columns and checks is then not parsed again for each use.
    """

    def __init__(self, tz: str = "UTC") -> None:
        """Args:
            tz: the zone of zone-less timestamps (``--tz``).
        """
        self.tz = tz
        self.parsed: dict[str, pl.Expr] = {}
        """``_p_*`` columns: parses of text columns."""
        self.placed: dict[str, pl.Expr] = {}
        """``_u_*`` columns: parsed local times placed in UTC."""
        self.checks: dict[str, list[pl.Expr]] = {}
        """Reject reason -> conditions (any True rejects the row)."""
        self.repairs: dict[str, pl.Expr] = {}
        """Repair code -> condition (True where a kept row was repaired)."""

    def check(self, reason: str, failed: pl.Expr) -> None:
        """Reject rows where ``failed`` is True with ``reason`` (one of :data:`CHECKS`)."""
        assert reason in CHECKS, reason
        self.checks.setdefault(reason, []).append(failed.fill_null(False))

    def repair(self, code: str, flag: pl.Expr) -> None:
        """Count kept rows where ``flag`` is True under repair ``code``."""
        old = self.repairs.get(code)
        flag = flag.fill_null(False)
        self.repairs[code] = flag if old is None else old | flag

    @staticmethod
    def text(column: str) -> pl.Expr:
        """The text of ``column``, null where it is one of :data:`MISSING_WORDS`."""
        t = pl.col(column)
        return pl.when(~t.is_in(MISSING_WORDS)).then(t)

    def number(self, column: str) -> pl.Expr:
        """``column`` as a float; text that is not a number is rejected as ``bad_number``."""
        t = self.text(column)
        name = f"_p_{column}"
        if name not in self.parsed:
            self.parsed[name] = t.cast(pl.Float64, strict=False)
            value = pl.col(name)
            self.check("bad_number", t.is_not_null() & (value.is_null() | ~value.is_finite()))
        return pl.col(name)

    def whole(self, column: str, high: int | None = sf.MAX_COUNT, low: int = 0) -> pl.Expr:
        """``column`` as a whole number (``12`` or ``12.0``); a fraction is ``bad_number``
        and, unless ``high`` is None, a value outside ``low..high`` is ``absurd_value``."""
        value = self.number(column)
        integral = value == value.round()
        self.check("bad_number", ~integral)
        whole = pl.when(integral).then(value).cast(pl.Int64, strict=False)
        self.check("absurd_value", integral & whole.is_null())  # beyond 64-bit integers
        if high is not None:
            self.check("absurd_value", (whole < low) | (whole > high))
        return whole

    def timestamp(self, column: str) -> pl.Expr:
        """``column`` (``2020-06-09 18:41:01``, wall-clock time in :attr:`tz`) as UTC; text
        that is not such a time is ``bad_timestamp``."""
        t = self.text(column)
        naive, utc = f"_p_{column}", f"_u_{column}"
        if naive not in self.parsed:
            self.parsed[naive] = pl.coalesce(
                *[t.str.strptime(pl.Datetime("ms"), fmt, strict=False) for fmt in TIME_FORMATS])
            self.placed[utc] = sf.to_utc(pl.col(naive), self.tz)
            self.check("bad_timestamp", t.is_not_null() & pl.col(utc).is_null())
            if self.tz != "UTC":
                self.repair("gpu_ambiguous_local_time",
                            sf.is_ambiguous_local(pl.col(naive), self.tz))
        return pl.col(utc)

    def reason(self) -> pl.Expr:
        """The scan's ``_reason``, else the first failed check, else null (kept)."""
        def any_of(exprs: list[pl.Expr]) -> pl.Expr:
            return pl.any_horizontal(exprs) if len(exprs) > 1 else exprs[0]

        first = sf.first_of([(any_of(self.checks[name]), name) for name in CHECKS
                             if name in self.checks])
        return pl.coalesce(pl.col("_reason"), first).alias("_reason")

    def finish(self, rows: pl.LazyFrame, values: dict[str, pl.Expr], file: str,
               extra: dict[str, pl.Expr] | None = None) -> pl.LazyFrame:
        """The reader's frame: canonical columns from ``values`` (null where absent), the
        internal columns, one ``_repair_<code>`` flag per repair, and the reader's own
        ``extra`` columns (which the pipeline does not write).

        ``end_before_start`` and ``start_before_submit`` are checked on the values' times.
        """
        times = {k: values[k] for k in ("submit_time", "start_time", "end_time") if k in values}
        if {"start_time", "end_time"} <= times.keys():
            self.check("end_before_start", times["end_time"] < times["start_time"])
        if {"submit_time", "start_time"} <= times.keys():
            self.check("start_before_submit", times["start_time"] < times["submit_time"])
        columns = [values.get(c.name, pl.lit(None)).cast(c.dtype, strict=False).alias(c.name)
                   for c in JOB_COLUMNS]
        flags = [f"{REPAIR_PREFIX}{code}" for code in self.repairs]
        kept = pl.col("_reason").is_null()
        return (
            self.parse(rows)
            .select(*columns, pl.lit(file).alias("_file"), "_line", "_raw", self.reason(),
                    *[flag.alias(name) for name, flag in zip(flags, self.repairs.values(),
                                                              strict=True)],
                    *[expr.alias(name) for name, expr in (extra or {}).items()])
            .with_columns(*[(kept & pl.col(name)).alias(name) for name in flags])
        )

    def parse(self, rows: pl.LazyFrame) -> pl.LazyFrame:
        """``rows`` with the parse columns the expressions handed out refer to."""
        return rows.with_columns(**self.parsed).with_columns(**self.placed)
