"""Shared console, verbosity and the error boundary of every command."""

from __future__ import annotations

import contextlib
import errno
import unicodedata
from collections.abc import Callable, Iterator
from typing import Any

import typer
from rich.console import Console
from rich.text import Text

from hpcpolicy.textfmt import duration

__all__ = [
    "console",
    "duration",
    "err_console",
    "fail_cleanly",
    "is_quiet",
    "os_error_line",
    "plain",
    "set_verbosity",
    "with_progress",
]

console = Console(highlight=False)
err_console = Console(stderr=True, highlight=False)
_state = {"quiet": False, "verbose": False}


def set_verbosity(*, quiet: bool, verbose: bool) -> None:
    """Record the global ``--quiet`` / ``--verbose`` choice."""
    _state["quiet"], _state["verbose"] = quiet, verbose


def is_quiet() -> bool:
    """Whether ``--quiet`` was given."""
    return _state["quiet"]


def _visible(char: str) -> str:
    """``char``, or its escape when it is a control or invisible format character (an
    escape sequence, a bell, a bidi override or a zero-width space would act on the
    terminal or hide text instead of showing)."""
    if char in "\t\n" or unicodedata.category(char) not in ("Cc", "Cf"):
        return char
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def plain(text: object, style: str = "") -> Text:
    """``text`` (log content, a file name, a message quoting either) as Rich text that is
    shown as it is: never read as markup, control characters escaped.

    Example:
        >>> plain("[bold]x\x1b[31m").plain
        '[bold]x\\x1b[31m'
    """
    return Text("".join(map(_visible, str(text))), style=style)


_OS_FIX = {
    errno.ENOSPC: "free some space, or write the output elsewhere",
    errno.EDQUOT: "free some space, or write the output elsewhere",
    errno.EACCES: "check the permissions, or choose another folder",
    errno.EPERM: "check the permissions, or choose another folder",
    errno.EROFS: "the file system is read-only; choose another folder",
    errno.EISDIR: "give the name of a file, not of a folder",
    errno.ENOTDIR: "a part of the path is a file, not a folder",
}


def os_error_line(exc: OSError) -> str:
    """An error of the machine (full disk, permissions, a folder where a file belongs) as
    one line: where, what, and how to fix it."""
    where = f"{exc.filename}: " if exc.filename else ""
    what = exc.strerror or str(exc)
    fix = _OS_FIX.get(exc.errno or 0)
    return f"{where}{what}" + (f"; {fix}" if fix else "")


@contextlib.contextmanager
def fail_cleanly() -> Iterator[None]:
    """Turn an :class:`HpcPolicyError`, or an :class:`OSError` (the machine failed: a full
    disk, a folder that may not be written), into a one-line message on stderr and exit code 1.

    Any other exception is a bug and keeps its traceback.
    """
    from hpcpolicy.errors import HpcPolicyError

    try:
        yield
    except (HpcPolicyError, OSError) as exc:
        text = os_error_line(exc) if isinstance(exc, OSError) else str(exc)
        # Messages hold text from the user's files: print it as text, never as markup.
        err_console.print(Text.assemble(("error: ", "bold red"), plain(text)), soft_wrap=True)
        raise typer.Exit(1) from None


Step = Callable[[str, int, int], None]


def with_progress(work: Callable[[Step | None], Any], what: str) -> Any:
    """Run ``work(step)`` under a transient progress bar on stderr (none under --quiet);
    ``step(label, done, total)`` updates it."""
    if is_quiet():
        return work(None)
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=err_console, transient=True) as bar:
        task = bar.add_task(what, total=None)

        def step(label: str, done: int, total: int) -> None:
            bar.update(task, description=f"{what} {label}", completed=done, total=total)

        return work(step)
