"""Options of one ingest run."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from hpcpolicy.errors import ConfigError

__all__ = ["FORMATS", "IngestConfig", "check_time_zone"]

FORMATS = ("auto", "swf", "sacct")
"""Values of ``--format``; ``auto`` recognises each of the others from the file's first lines."""


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
class IngestConfig:
    """How to read and clean the input logs."""

    format: str = "auto"
    """Input format: auto, swf or sacct."""
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

    def __post_init__(self) -> None:
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

    def to_dict(self) -> dict[str, Any]:
        """The config as a JSON-ready dict."""
        return asdict(self)
