"""Slurm's hostlist form of node names: ``n[1-4,7]``, ``gpu[01-02],login``, ``r[1-2]n[1-3]``.

Example:
    >>> expand_hostlist("n[1-3,7],gpu[08-09],login")
    ['n1', 'n2', 'n3', 'n7', 'gpu08', 'gpu09', 'login']
"""

from __future__ import annotations

import re

from hpcpolicy.errors import ConfigError

__all__ = ["expand_hostlist"]

_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")


def expand_hostlist(text: str) -> list[str]:
    """The node names of a Slurm hostlist (``n[1-4,7]``, ``a,b``, ``r[1-2]n[01-02]``).

    Raises:
        ConfigError: unbalanced brackets or a range that is not ``A`` or ``A-B`` with A <= B.
    """
    names: list[str] = []
    depth, start = 0, 0
    for i, ch in enumerate(text + ","):
        depth += {"[": 1, "]": -1}.get(ch, 0)
        if depth not in (0, 1):
            raise ConfigError(f"hostlist {text!r}: unbalanced brackets")
        if ch == "," and depth == 0:
            if text[start:i].strip():
                names.extend(_expand_one(text[start:i].strip(), text))
            start = i + 1
    if depth:
        raise ConfigError(f"hostlist {text!r}: unbalanced brackets")
    return names


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
