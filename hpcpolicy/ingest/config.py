"""Options of one ingest run."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import ClassVar
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from hpcpolicy.config import Config
from hpcpolicy.errors import ConfigError
from hpcpolicy.limits import Limits

__all__ = ["DEFAULT_ORIGIN", "FORMATS", "IngestConfig", "check_time_zone", "parse_origin"]

FORMATS = ("auto", "swf", "sacct", "alibaba", "philly", "helios")
"""Values of ``--format``; ``auto`` recognises each of the others from the file's first lines."""

DEFAULT_ORIGIN = "2023-01-01T00:00:00Z"
"""Time origin of an Alibaba GPU trace, whose times count seconds from its start and which
gives no date: an arbitrary instant, chosen so that the table has plausible 2023 dates."""


def parse_origin(text: str, option: str = "origin") -> datetime:
    """The UTC instant of an ISO 8601 time (``2023-01-01T00:00:00Z``; no zone means UTC).

    Raises:
        ConfigError: naming ``option`` and giving an example.
    """
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise ConfigError(f"{option} {text!r} is not an ISO 8601 time; write it like "
                          f"{DEFAULT_ORIGIN}") from None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def check_time_zone(tz: str, option: str = "tz") -> str:
    """``tz`` if it names a known IANA time zone.

    Raises:
        ConfigError: naming ``option`` and giving examples of valid names.
    """
    try:
        ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError):
        raise ConfigError(
            f"{option} {tz!r} is not a known time zone; use an IANA name such as "
            "'UTC' or 'Europe/Stockholm'"
        ) from None
    return tz


@dataclass(frozen=True)
class IngestConfig(Config):
    """How to read and clean the input logs."""

    label: ClassVar[str] = "ingest"

    format: str = "auto"
    """Input format: one of :data:`FORMATS`."""
    tz: str = "UTC"
    """Time zone of zone-less timestamps in the input (sacct prints the cluster's local time)."""
    procs: int | None = None
    """Machine size in processors, for SWF files whose header does not say (else inferred)."""
    max_reject_fraction: float = 0.5
    """Fail (writing nothing) when more than this share of the rows is rejected: a sign of a
    wrong format or delimiter rather than of a few bad rows."""
    overwrite: bool = False
    """Replace existing output files instead of refusing."""
    sacct_columns: tuple[str, ...] | None = None
    """Column names of a header-less sacct export, in order (its ``--format`` list); None when
    the file has a header line."""
    origin: str | None = None
    """Alibaba GPU trace: the instant its times (seconds from the trace start) count from,
    ISO 8601; None means :data:`DEFAULT_ORIGIN`."""
    node_list: str | None = None
    """Alibaba GPU trace: its node list, written as a cluster spec beside the job table; None
    means ``openb_node_list_all_node.csv`` beside the pod list, if it is there."""
    max_line_bytes: int = Limits.line_bytes
    """Longest input line accepted, in bytes (a longer one ends the ingest with an error)."""
    max_columns: int = Limits.columns
    """Most columns an input's header may name (its bytes are capped in proportion)."""
    max_gzip_ratio: float = Limits.gzip_ratio
    """Most times gzip input may expand, checked once more than
    :data:`~hpcpolicy.limits.GZIP_FLOOR_BYTES` came out (real logs expand 5 to 12 times)."""

    @property
    def limits(self) -> Limits:
        """The bounds the readers check as they read (:mod:`hpcpolicy.limits`)."""
        return Limits(line_bytes=self.max_line_bytes, columns=self.max_columns,
                      gzip_ratio=self.max_gzip_ratio)

    def validate(self) -> None:
        if self.format not in FORMATS:
            raise ConfigError(f"format {self.format!r} is not one of {', '.join(FORMATS)}")
        check_time_zone(self.tz)
        if self.procs is not None and self.procs < 1:
            raise ConfigError(f"procs must be a positive number of processors, not {self.procs}")
        if not 0.0 <= self.max_reject_fraction <= 1.0:
            raise ConfigError(
                f"max_reject_fraction must lie in [0, 1], not {self.max_reject_fraction}"
            )
        if self.sacct_columns is not None:
            names = [c.strip() for c in self.sacct_columns]
            if not names or any(not c for c in names) or len(set(names)) != len(names):
                raise ConfigError(
                    "sacct_columns must list distinct, non-empty column names, as given to "
                    "sacct --format (e.g. JobID,Submit,Start,End,State)"
                )
            object.__setattr__(self, "sacct_columns", tuple(names))
        if self.origin is not None:
            parse_origin(self.origin)
        self._at_least(1, "max_line_bytes", "max_columns", "max_gzip_ratio")
