"""Numbers as short text for people: durations and signed percentages.

Example:
    >>> duration(5400), signed_percent(-0.384)
    ('1.5h', '-38%')
"""

from __future__ import annotations

__all__ = ["duration", "signed_percent"]


def duration(seconds: float) -> str:
    """Seconds in the largest unit that keeps them short: 45s, 12.5m, 3.4h, 8.9d."""
    if round(seconds) < 60:
        return f"{seconds:.0f}s"
    if round(seconds / 6) < 600:
        return f"{seconds / 60:.1f}m"
    if round(seconds / 360) < 240:
        return f"{seconds / 3600:.1f}h"
    return f"{seconds / 86400:.1f}d"


def signed_percent(share: float) -> str:
    """A relative change as a signed whole percentage (one decimal below 1 %)."""
    if abs(share) < 0.01:
        return f"{share:+.1%}"
    return f"{share:+.0%}"
