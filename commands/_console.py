"""Shared console, verbosity and the error boundary of every command."""

from __future__ import annotations

import contextlib
import errno
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from hpcpolicy.textfmt import duration, visible

__all__ = [
    "console",
    "duration",
    "err_console",
    "fail_cleanly",
    "is_quiet",
    "note_first_compile",
    "os_error_line",
    "plain",
    "print_note",
    "set_verbosity",
    "short_names",
    "whole_values",
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


def plain(text: object, style: str = "") -> Text:
    """``text`` (a path, a name or message from the user's files) as Rich text shown as it
    is: never read as markup, invisible and control characters escaped (:func:`visible`),
    nothing cut, so a path can be copied.

    Example:
        >>> print(plain("[bold]x\x1b[31m").plain)
        [bold]x\\u001b[31m
    """
    return Text(visible(text, longest=None), style=style)


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
        message = visible(text, longest=400)
        err_console.print(Text.assemble(("error: ", "bold red"), message), soft_wrap=True)
        raise typer.Exit(1) from None


def print_note(note: str) -> None:
    """One note of a workload or report, as plain visible text (:func:`visible`):
    ``note: ...`` in yellow, or, for a note that starts ``warning: ``, the whole line in bold
    red so it is not missed."""
    if note.startswith("warning: "):
        console.print(Text(visible(note), "bold red"), soft_wrap=True)
    else:
        console.print(Text.assemble(("note: ", "yellow"), visible(note)), soft_wrap=True)


def note_first_compile() -> None:
    """Say so when this run compiles the replay engine (the first on a machine): a minute
    of silence would look like a hang."""
    from hpcpolicy.sim.compiled import engine_compiled

    if not engine_compiled() and not is_quiet():
        print_note("first run on this machine: compiling the replay engine (about a minute "
                   "on two cores, once; later runs start at once)")


def short_names(names: Sequence[str], width: int = 16) -> tuple[dict[str, str], list[str]]:
    """Labels for a table column: a policy folder path longer than ``width`` becomes
    ``parent/name`` (the parent cut to fit), so that the table fits 80 columns without
    cutting a number or breaking a name mid-word; the second value holds the
    ``label = full path`` lines to print under the table."""
    labels: dict[str, str] = {}
    legend: list[str] = []
    for name in dict.fromkeys(names):
        parts = name.replace("\\", "/").rstrip("/").split("/")
        if len(name) <= width or len(parts) < 3:
            labels[name] = visible(name)
            continue
        parent = parts[-2] if len(parts[-2]) + len(parts[-1]) < width else \
            parts[-2][: max(4, width - len(parts[-1]) - 2)] + "…"
        label = f"{parent}/{parts[-1]}"
        while label in labels.values():
            label += "'"
        labels[name] = visible(label)
        legend.append(f"{labels[name]} = {visible(name, longest=None)}")
    return labels, legend


def whole_values(table: Table, rows: Sequence[Sequence[str | Text]]) -> None:
    """Add ``rows`` to ``table`` with every column unwrapped and as wide as its widest value
    (headers of two words go on two lines), so that an 80-column table never cuts a number
    or breaks a name mid-word."""
    for column in table.columns:
        column.no_wrap = True
        if isinstance(column.header, str):
            column.header = column.header.replace(" ", "\n", 1)
    for row in rows:
        table.add_row(*row)


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
