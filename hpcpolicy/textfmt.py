"""Short text for people: durations, signed percentages, and names from a log made visible.

Example:
    >>> duration(5400), signed_percent(-0.384)
    ('1.5h', '-38%')
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["LONGEST_WORD", "duration", "rich_safe", "signed_percent", "time_unit", "visible"]

LONGEST_WORD = 120
"""Longest run of non-blank characters :func:`visible` shows whole by default (a long path
fits; a 5,000-character name does not)."""
_KEEP = 40
"""Characters kept of a run that is cut."""
_HIDDEN = frozenset(("Cc", "Cf", "Co", "Cs", "Cn", "Zl", "Zp"))
"""Unicode categories that print as nothing or move other text: controls, format characters
(bidirectional overrides, zero-width joiners and spaces), private use, unassigned."""

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


def visible(text: object, longest: int | None = LONGEST_WORD) -> str:
    r"""Text from a log as a reader may safely see it: every invisible or direction-changing
    character written as its escape (``\u202e``), and every run of more than
    :data:`LONGEST_WORD` (``longest``; None: no limit) non-blank characters cut, saying how
    much was left out.

    Escaping for HTML or Markdown is still the caller's job; this makes the text honest.

    Example:
        >>> visible("root\u202etxt.exe")
        'root\\u202etxt.exe'
        >>> visible("x" * 100, longest=80)
        'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx…(+60 chars)'
    """
    shown = "".join(f"\\u{ord(c):04x}" if unicodedata.category(c) in _HIDDEN else c
                    for c in str(text))
    if longest is None:
        return shown
    return re.sub(rf"\S{{{longest + 1},}}",
                  lambda m: f"{m[0][:_KEEP]}…(+{len(m[0]) - _KEEP:,} chars)", shown)


def rich_safe(text: object, longest: int | None = LONGEST_WORD) -> str:
    r"""Text from a log to put inside a Rich markup string: :func:`visible` (control
    characters such as ESC written as escapes, so no colour, window title or clear-screen
    sequence reaches the terminal; long runs cut) with Rich's markup escaped, so a name such as
    ``[bold]x`` prints as it is written.

    Where the text is a whole cell or line, ``commands._console.plain`` (a Rich ``Text``) does
    the same without markup.

    Example:
        >>> rich_safe("[red]x\x1b]0;title\x07")
        '\\[red]x\\u001b]0;title\\u0007'
    """
    from rich.markup import escape

    return escape(visible(text, longest))
