"""``hpcpolicy stats``: being written (placeholder so the CLI imports)."""

from __future__ import annotations

__all__ = ["main"]


def main() -> None:
    """Not written yet."""
    raise SystemExit("hpcpolicy stats: not written yet")
