"""Options shared by several commands, defined once so they mean the same everywhere."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

__all__ = ["JsonOutOpt", "OverwriteOpt", "SeedOpt"]

SeedOpt = Annotated[
    int, typer.Option("--seed", help="Random seed; the same inputs and seed give the same output.")
]
OverwriteOpt = Annotated[
    bool, typer.Option("--overwrite", help="Replace output files that already exist.")
]
JsonOutOpt = Annotated[
    Path | None,
    typer.Option("--json", help="Also write the result as JSON to this file.", dir_okay=False),
]
