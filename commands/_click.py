"""How the command line reads to a person: usage lines and mistakes on the command line.

Typer writes a required argument as ``{table}`` in usage lines, and click answers a mistyped
option with a usage block, a hint and an error over three lines. Here a usage line names an
argument the classic way (``TABLE``, ``[TABLE]``) and a mistake is one line: ``error: ...``,
with the closest option or command when there is one, and where to read more.
"""

from __future__ import annotations

import re
import sys
from difflib import SequenceMatcher
from typing import Any, NoReturn

import typer
from typer.core import TyperCommand, TyperGroup

try:  # typer 0.2x carries its own copy of click
    from typer._click import exceptions as click
except ImportError:  # older typer runs on click itself
    import click.exceptions as click  # type: ignore[no-redef]

__all__ = ["Command", "Group", "usage_error_line"]

_BRACED = re.compile(r"^[{\[]([^}\]]+)[}\]](\.\.\.)?$")


def _classic(piece: str) -> str:
    match = _BRACED.match(piece)
    if match is None or piece == "[OPTIONS]":
        return piece
    name = match.group(1).upper() + (match.group(2) or "")
    return f"[{name}]" if piece.startswith("[") else name


class Command(TyperCommand):
    """A subcommand whose usage line names its arguments as ``TABLE`` or ``[TABLE]``."""

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        return [_classic(piece) for piece in super().collect_usage_pieces(ctx)]


def usage_error_line(exc: click.UsageError) -> str:
    """One line for a mistake on the command line: what, the closest spelling, where to look.

    Example:
        >>> exc = click.NoSuchOption("--polcy", possibilities=["--policy", "--procs"])
        >>> usage_error_line(exc)
        'no such option --polcy; did you mean --policy? (see --help)'
    """
    help_hint = (f"see {exc.ctx.command_path} --help" if exc.ctx is not None
                 else "see --help")
    if isinstance(exc, click.NoSuchOption):
        close = sorted(exc.possibilities or (),
                       key=lambda p: -_similarity(p, exc.option_name))[:1]
        guess = f"; did you mean {close[0]}?" if close else ""
        return f"no such option {exc.option_name}{guess} ({help_hint})"
    message = exc.format_message().rstrip(".").replace(". Did you mean", "; did you mean")
    return f"{message[:1].lower()}{message[1:]} ({help_hint})"


def _similarity(a: str, b: str) -> float:
    return SequenceMatcher(None, a, b).ratio()


class Group(TyperGroup):
    """The root command: a mistake on the command line ends in one ``error:`` line, exit 2."""

    def main(self, *args: Any, **kwargs: Any) -> Any:
        standalone = kwargs.get("standalone_mode", True)
        kwargs["standalone_mode"] = False
        if not standalone:
            return super().main(*args, **kwargs)
        try:
            code = super().main(*args, **kwargs)
        except click.UsageError as exc:
            if type(exc).__name__ == "NoArgsIsHelpError":  # the help itself, not a mistake
                exc.show()
                sys.exit(exc.exit_code)
            _exit(f"error: {usage_error_line(exc)}", exc.exit_code)
        except click.ClickException as exc:
            exc.show()
            sys.exit(exc.exit_code)
        except typer.Abort:
            _exit("Aborted!", 1)
        sys.exit(code if isinstance(code, int) else 0)


def _exit(line: str, code: int) -> NoReturn:
    typer.echo(line, err=True)
    sys.exit(code)
