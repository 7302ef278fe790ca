"""Shared console, verbosity and the error boundary of every command."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import typer
from rich.console import Console
from rich.text import Text

from hpcpolicy.textfmt import duration, visible

__all__ = [
    "console",
    "duration",
    "err_console",
    "fail_cleanly",
    "is_quiet",
    "print_note",
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


@contextlib.contextmanager
def fail_cleanly() -> Iterator[None]:
    """Turn an :class:`HpcPolicyError` into a one-line message on stderr and exit code 1.

    Any other exception is a bug and keeps its traceback.
    """
    from hpcpolicy.errors import HpcPolicyError

    try:
        yield
    except HpcPolicyError as exc:
        # Messages hold text from the user's files: print it as text, never as markup.
        message = visible(exc, longest=400)
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
