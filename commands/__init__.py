"""The ``hpcpolicy`` command line: one module per subcommand, composed here.

Command modules import only typer and rich at load time, so that ``hpcpolicy --help`` stays
fast; polars, numpy and the library are imported inside the command bodies.
"""

from __future__ import annotations

from typing import Annotated

import typer

from hpcpolicy.commands import (
    advise,
    calibrate,
    dataset,
    demo,
    evaluate,
    fidelity,
    generate,
    ingest,
    sign,
    simulate,
    stats,
    sweep,
    train,
    tune,
    verify,
    whatif,
)
from hpcpolicy.commands._click import Command, Group
from hpcpolicy.commands._console import set_verbosity
from hpcpolicy.outlock import end_claims
from hpcpolicy.version import __version__

__all__ = ["app", "main"]

app = typer.Typer(
    name="hpcpolicy",
    cls=Group,
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
    rich_markup_mode=None,  # click's help: wraps at word boundaries, never cuts a word
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"hpcpolicy {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    ctx: typer.Context,
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", help="Print only errors and final paths.")
    ] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Print more detail.")] = False,
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Print the version."),
    ] = False,
) -> None:
    """Turn a cluster's job logs into scheduling answers you can act on.

    Typical flow: ingest a Slurm or SWF log into a clean job table, look at it with stats,
    replay it with simulate, and compare policies with whatif. demo runs the whole flow on a
    built-in synthetic workload, with no download.
    """
    set_verbosity(quiet=quiet, verbose=verbose)
    ctx.call_on_close(end_claims)  # outputs claimed and not written are free again after


app.command("demo", cls=Command)(demo.main)
app.command("generate", cls=Command)(generate.main)
app.command("ingest", cls=Command)(ingest.main)
app.command("simulate", cls=Command)(simulate.main)
app.command("fidelity", cls=Command)(fidelity.main)
app.command("calibrate", cls=Command)(calibrate.main)
app.command("stats", cls=Command)(stats.main)
app.command("train", cls=Command)(train.main)
app.command("tune", cls=Command)(tune.main)
app.command("sweep", cls=Command)(sweep.main)
app.command("evaluate", cls=Command)(evaluate.main)
app.add_typer(dataset.app, name="dataset")
app.command("whatif", cls=Command)(whatif.main)
app.command("advise", cls=Command)(advise.main)
app.command("sign", cls=Command)(sign.main)
app.command("verify", cls=Command)(verify.main)


def main() -> None:
    """Console-script entry point."""
    app()
