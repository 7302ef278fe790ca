"""Shared console, verbosity and the error boundary of every command."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import typer
from rich.console import Console
from rich.text import Text

__all__ = ["console", "err_console", "fail_cleanly", "is_quiet", "set_verbosity"]

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
        err_console.print(Text.assemble(("error: ", "bold red"), str(exc)), soft_wrap=True)
        raise typer.Exit(1) from None
