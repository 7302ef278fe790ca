"""Atomic output: write to a temporary file beside the target, then rename over it.

An interrupted run therefore never leaves a half-written file under the final name.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = ["atomic_path", "file_sha256", "replace_dir", "write_json", "write_text"]


@contextlib.contextmanager
def atomic_path(target: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path in the target's folder; rename it to ``target`` on success.

    On any exception the temporary file is removed and the target is left untouched.

    Example:
        >>> import tempfile, pathlib
        >>> d = pathlib.Path(tempfile.mkdtemp())
        >>> with atomic_path(d / "x.txt") as tmp:
        ...     _ = tmp.write_text("done")
        >>> (d / "x.txt").read_text()
        'done'
    """
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".part", dir=target.parent)
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        if tmp.exists():  # mkstemp makes 0600 files; give outputs the usual umask mode
            os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def replace_dir(build: str | os.PathLike[str], target: str | os.PathLike[str]) -> None:
    """Move the finished folder ``build`` to ``target``, replacing an older one.

    The old folder is first renamed aside, then ``build`` is renamed into place: a reader
    sees the old folder or the new one, never a mix. Both must be on one file system.
    """
    import shutil

    build, target = Path(build), Path(target)
    old = None
    if target.exists():
        old = Path(tempfile.mkdtemp(prefix=f".{target.name}.old.", dir=target.parent))
        os.replace(target, old / target.name)
    os.replace(build, target)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def _umask() -> int:
    """The process umask (read by setting and restoring it)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_text(target: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` (UTF-8) to ``target`` atomically."""
    with atomic_path(target) as tmp:
        tmp.write_text(text, encoding="utf-8")


def write_json(target: str | os.PathLike[str], obj: Any) -> None:
    """Write ``obj`` as indented, key-sorted JSON to ``target`` atomically."""
    write_text(target, json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")


def file_sha256(path: str | os.PathLike[str], chunk: int = 1 << 20) -> str:
    """Hex SHA-256 of a file's bytes, read in chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()
