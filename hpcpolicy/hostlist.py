"""Slurm's hostlist form of node names: ``n[1-4,7]``, ``gpu[01-02],login``, ``r[1-2]n[1-3]``.

Example:
    >>> expand_hostlist("n[1-3,7],gpu[08-09],login")
    ['n1', 'n2', 'n3', 'n7', 'gpu08', 'gpu09', 'login']
"""

from __future__ import annotations

import re

from hpcpolicy.errors import ConfigError

__all__ = ["MAX_HOSTLIST", "expand_hostlist", "hostlist_size"]

_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")
MAX_HOSTLIST = 1_000_000
"""Most names one host list may expand to: a log's NodeList or a configuration's Nodes= with
more is a typo or a bomb (``n[1-1000000000]`` would take gigabytes), refused before it is
expanded."""


def expand_hostlist(text: str) -> list[str]:
    """The node names of a Slurm hostlist (``n[1-4,7]``, ``a,b``, ``r[1-2]n[01-02]``).

    Raises:
        ConfigError: unbalanced brackets, a range that is not ``A`` or ``A-B`` with A <= B, or
            more than :data:`MAX_HOSTLIST` names (counted before anything is expanded).
    """
    size = hostlist_size(text)
    if size > MAX_HOSTLIST:
        raise ConfigError(f"hostlist {text[:80]!r}: names {size:,} nodes, more than the "
                          f"{MAX_HOSTLIST:,} read here; is the range a typo?")
    return [name for element in _elements(text) for name in _expand_one(element, text)]


def _elements(text: str) -> list[str]:
    """The comma-separated elements of a hostlist (commas inside brackets kept), blanks left
    out; unbalanced or nested brackets raise :class:`ConfigError`."""
    elements: list[str] = []
    depth, start = 0, 0
    for i, ch in enumerate(text + ","):
        depth += {"[": 1, "]": -1}.get(ch, 0)
        if depth not in (0, 1):
            raise ConfigError(f"hostlist {text!r}: unbalanced brackets")
        if ch == "," and depth == 0:
            if text[start:i].strip():
                elements.append(text[start:i].strip())
            start = i + 1
    if depth:
        raise ConfigError(f"hostlist {text!r}: unbalanced brackets")
    return elements


def _expand_one(name: str, whole: str) -> list[str]:
    """One hostlist element, its first bracket expanded (the rest recursively)."""
    open_at = name.find("[")
    if open_at < 0:
        if "]" in name:
            raise ConfigError(f"hostlist {whole!r}: unbalanced brackets")
        return [name]
    close_at = name.index("]", open_at)
    head, tail = name[:open_at], name[close_at + 1:]
    out: list[str] = []
    for part in name[open_at + 1:close_at].split(","):
        m = _RANGE.match(part.strip())
        if m is None or (m.group(2) is not None and int(m.group(2)) < int(m.group(1))):
            raise ConfigError(f"hostlist {whole!r}: {part!r} is not a number or a range A-B")
        lo, hi = m.group(1), m.group(2) or m.group(1)
        width = len(lo) if lo.startswith("0") else 0
        for k in range(int(lo), int(hi) + 1):
            out.extend(head + str(k).zfill(width) + rest for rest in _expand_one(tail, whole))
    return out


def hostlist_size(text: str) -> int:
    """How many names ``text`` expands to, counted without expanding them (a range that
    cannot be read counts 0: :func:`expand_hostlist` names what is wrong with it).

    Raises:
        ConfigError: unbalanced brackets.

    Example:
        >>> hostlist_size("r[1-2]n[01-16],login"), hostlist_size("n[1-1000000000]")
        (33, 1000000000)
    """
    return sum(_count_one(element) for element in _elements(text))


def _count_one(name: str) -> int:
    open_at = name.find("[")
    if open_at < 0:
        return 1 if name else 0
    close_at = name.find("]", open_at)
    if close_at < 0:
        return 0
    count = 0
    for part in name[open_at + 1:close_at].split(","):
        m = _RANGE.match(part.strip())
        if m is None:
            return 0
        count += max(int(m.group(2) or m.group(1)) - int(m.group(1)) + 1, 0)
    return count * _count_one(name[close_at + 1:]) if name[close_at + 1:] else count
