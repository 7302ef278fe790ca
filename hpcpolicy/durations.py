"""Lengths of time as people write them on a command line or in a config file, read by one
parser everywhere (``--period``, ``--walltime-fallback``, limits): ``90``, ``90s``, ``15m``,
``12h``, ``7d``, ``2w``, and Slurm's own ``[D-]HH:MM[:SS]``.
"""

from __future__ import annotations

import math
import re

__all__ = ["DURATION_HINT", "parse_duration", "round_up_duration"]

DURATION_HINT = "a length such as 7d, 1w, 12h, 90m, 3600 (seconds) or Slurm's 1-12:00:00"
"""How to write a length, for messages that refuse one."""

_UNIT = re.compile(r"^(\d+(?:\.\d+)?)\s*(s|sec|m|min|h|hr|d|day|days|w|week|weeks)?$")
_SLURM = re.compile(r"^(?:(\d+)-)?(\d+):(\d{1,2})(?::(\d{1,2}))?$")
_UNIT_S = {None: 1, "s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600, "hr": 3600, "d": 86400,
           "day": 86400, "days": 86400, "w": 604800, "week": 604800, "weeks": 604800}


def parse_duration(text: str) -> int | None:
    """Whole seconds of a written length, or None when ``text`` is not one.

    Example:
        >>> parse_duration("12h"), parse_duration("1w"), parse_duration("3600")
        (43200, 604800, 3600)
        >>> parse_duration("1-12:00:00"), parse_duration("02:30"), parse_duration("soon")
        (129600, 9000, None)
    """
    written = text.strip().lower()
    unit = _UNIT.match(written)
    if unit is not None:
        return round(float(unit[1]) * _UNIT_S[unit[2]])
    slurm = _SLURM.match(written)
    if slurm is None:
        return None
    days, hours, minutes, seconds = (int(g) if g else 0 for g in slurm.groups())
    if minutes >= 60 or seconds >= 60:
        return None
    return ((days * 24 + hours) * 60 + minutes) * 60 + seconds


def round_up_duration(seconds: float) -> str:
    """A length rounded up to a value worth writing as an option: whole minutes below an
    hour, whole hours below two days, whole days above.

    Example:
        >>> round_up_duration(41000), round_up_duration(125), round_up_duration(300000)
        ('12h', '3m', '4d')
    """
    for scale, unit in ((86400, "d"), (3600, "h"), (60, "m")):
        if seconds >= 2 * scale or (unit == "m" and seconds > 0):
            return f"{math.ceil(seconds / scale)}{unit}"
    return f"{math.ceil(max(seconds, 1))}s"
