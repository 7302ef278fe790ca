"""Reading small JSON and TOML documents (configs, manifests, cards, site models) with bounds.

Every such document comes from a user, a log author or a policy folder, so it is read as data
with limits: a size cap checked before reading, and a nesting cap checked before parsing (the
standard parsers recurse, and a deeply nested file would end in ``RecursionError``). Whatever
is wrong ends in one line naming the file, raised as the error class the caller names.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

from hpcpolicy.errors import ConfigError, HpcPolicyError

__all__ = ["MAX_DEPTH", "MAX_DOC_BYTES", "check_depth", "loads_json", "loads_toml", "read_json",
           "read_toml"]

MAX_DOC_BYTES = 64 * 1024 * 1024
"""Largest configuration or manifest document read (64 MiB): far above any real one."""
MAX_DEPTH = 64
"""Deepest nesting of arrays and tables accepted: real documents stay under ten."""


def check_depth(text: str, where: str, error: type[HpcPolicyError] = ConfigError) -> None:
    """Raise ``error`` when brackets or braces nest deeper than :data:`MAX_DEPTH`.

    Brackets inside strings count too, so this can only over-count: a document it passes
    cannot exhaust the parser's recursion.

    Example:
        >>> check_depth('{"a": [1, 2]}', "x.json")
        >>> try:
        ...     check_depth("[" * 100, "x.json")
        ... except ConfigError as exc:
        ...     print(exc)
        x.json: nested more than 64 levels deep; is it really this kind of file?
    """
    depth = 0
    for ch in text:
        if ch in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                raise error(f"{where}: nested more than {MAX_DEPTH} levels deep; "
                            "is it really this kind of file?")
        elif ch in "]}":
            depth -= 1


def _read_text(path: Path, what: str, error: type[HpcPolicyError]) -> str:
    try:
        size = path.stat().st_size
        if size > MAX_DOC_BYTES:
            raise error(f"{path}: {size:,} bytes, more than the {MAX_DOC_BYTES // 2**20} MiB "
                        f"a {what} may have; is it the right file?")
        with path.open("rb") as fh:
            raw = fh.read(MAX_DOC_BYTES + 1)
    except OSError as exc:
        raise error(f"{path}: cannot read the {what}: {exc.strerror or exc}") from exc
    if len(raw) > MAX_DOC_BYTES:  # grew while we read it
        raise error(f"{path}: more than {MAX_DOC_BYTES // 2**20} MiB; is it the right file?")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(f"{path}: the {what} is not UTF-8 text (byte {exc.start}); "
                    "is it the right file?") from exc


def read_json(path: str | Path, what: str, error: type[HpcPolicyError] = ConfigError) -> Any:
    """Parse a JSON document, or raise ``error`` with one line naming the file and the fix.

    Args:
        path: the file.
        what: what the file is, for the message ("policy manifest", "model card").
        error: the :class:`HpcPolicyError` subclass to raise.

    Returns:
        The parsed value (its type is the caller's to check).
    """
    path = Path(path)
    return loads_json(_read_text(path, what, error), str(path), what, error)


def loads_json(text: str, where: str, what: str,
               error: type[HpcPolicyError] = ConfigError) -> Any:
    """Parse JSON text already read, with the same depth cap and one-line errors."""
    check_depth(text, where, error)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise error(f"{where}:{exc.lineno}:{exc.colno}: the {what} is not valid JSON: "
                    f"{exc.msg}") from exc


def read_toml(path: str | Path, what: str,
              error: type[HpcPolicyError] = ConfigError) -> dict[str, Any]:
    """Parse a TOML document, or raise ``error`` with one line naming the file and the fix."""
    path = Path(path)
    text = _read_text(path, what, error)
    return loads_toml(text, str(path), what, error)


def loads_toml(text: str, where: str, what: str,
               error: type[HpcPolicyError] = ConfigError) -> dict[str, Any]:
    """Parse TOML text already read, with the same depth cap and one-line errors."""
    check_depth(text, where, error)
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise error(f"{where}: the {what} is not valid TOML: {exc}") from exc
