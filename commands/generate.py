"""``hpcpolicy generate``: a synthetic workload (Lublin-Feitelson model) as an SWF log."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from hpcpolicy.commands._console import console, fail_cleanly, is_quiet, plain
from hpcpolicy.commands._options import (
    OverwriteOpt,
    SeedOpt,
    a_file,
    lower_choice,
    refuse_existing,
)

__all__ = ["main"]


def main(
    out: Annotated[
        Path,
        typer.Option("--out", "-o", help="SWF file to write (e.g. trace.swf).", callback=a_file),
    ] = Path("trace.swf"),
    model: Annotated[
        str, typer.Option("--model", "-m", help="lublin (whole-sample parameters) or "
                          "lublin-split (batch and interactive streams).",
                          callback=lower_choice)
    ] = "lublin",
    jobs: Annotated[int, typer.Option("--jobs", "-n", help="Number of jobs.")] = 5000,
    procs: Annotated[
        int, typer.Option("--procs", "-p", help="Machine size in processors (the largest job; "
                          "the log's MaxProcs).")
    ] = 256,
    seed: SeedOpt = 0,
    overwrite: OverwriteOpt = False,
) -> None:
    """Write a synthetic workload drawn from a published model, as an SWF log.

    The Lublin-Feitelson (2003) model of rigid jobs: job sizes (serial share, powers of
    two), runtimes that grow with size, and arrivals that follow the working day. The same
    options and seed give a byte-identical file; read it with hpcpolicy ingest.

    Examples:

        hpcpolicy generate --jobs 10000 --procs 128 --seed 1 -o lublin.swf

        hpcpolicy generate --model lublin-split -o mixed.swf && hpcpolicy ingest mixed.swf
    """
    from hpcpolicy.generate import GenerateConfig, generate

    with fail_cleanly():
        cfg = GenerateConfig(model=model, jobs=jobs, procs=procs, seed=seed)
        refuse_existing(out, overwrite=overwrite)
        result = generate(cfg, out)
    if is_quiet():
        console.print(str(result.path), markup=False)
        return
    days = result.span_s / 86400
    console.print(
        plain(f"wrote {result.path} ({cfg.jobs:,} jobs, model {cfg.model}, seed {cfg.seed}): "
        f"{days:.1f} days of arrivals on {cfg.procs:,} processors, mean size "
        f"{result.mean_size:.1f}, mean runtime {result.mean_run_s / 3600:.2f} h, offered "
        f"load {result.offered_load:.2f}"),
        markup=False, highlight=False, soft_wrap=True,
    )
