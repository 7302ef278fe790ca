"""Numbers as short text for people: durations and signed percentages.

Example:
    >>> duration(5400), signed_percent(-0.384)
    ('1.5h', '-38%')
"""

from __future__ import annotations

__all__ = ["duration", "signed_percent", "time_unit"]

_TIME_UNITS = ((86400, "d"), (3600, "h"), (60, "min"))


def time_unit(seconds: float) -> tuple[int, str]:
    """The unit a duration of this size reads best in: (seconds per unit, unit name);
    minutes from 1 min, hours from 1 h, days from 1 d.

    Example:
        >>> time_unit(5400)
        (3600, 'h')
    """
    for scale, name in _TIME_UNITS:
        if abs(seconds) >= scale:
            return scale, name
    return 1, "s"


def duration(seconds: float) -> str:
    """Seconds in the largest unit that keeps them short: 45s, 12.5m, 3.4h, 8.9d."""
    scale, unit = time_unit(seconds)
    if scale == 1:
        return f"{seconds:.0f}s"
    return f"{seconds / scale:.1f}{unit[0]}"


def signed_percent(share: float) -> str:
    """A relative change as a signed whole percentage (one decimal below 1 %)."""
    if abs(share) < 0.01:
        return f"{share:+.1%}"
    return f"{share:+.0%}"
