"""``sweep(...)``: every unfinished cell of a grid, in this process or as Ray tasks, then the
combined table.

A cell whose folder already holds its report is skipped, so a sweep stopped at any point
(Ctrl-C, a lost node) continues where it stopped when run again. With the ``ray`` backend each
cell is one Ray task holding ``cell_cpus`` cores, on a Ray started here or on the cluster at
``address``; the sweep folder must then lie on a file system every Ray node sees.

Example:
    >>> from hpcpolicy.sweep import load_spec
    >>> result = sweep(load_spec("grid.toml"), "sweeps/grid")  # doctest: +SKIP
    >>> result.paths["markdown"]  # doctest: +SKIP
    PosixPath('sweeps/grid/sweep.md')
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hpcpolicy.errors import ConfigError, HpcPolicyError
from hpcpolicy.sweep.cells import cell_row, finished, run_cell
from hpcpolicy.sweep.spec import Cell, SweepSpec
from hpcpolicy.sweep.table import write_table

__all__ = ["SweepResult", "sweep"]

OnCell = Callable[[Cell, int, int], None]


@dataclass(frozen=True)
class SweepResult:
    """What a sweep did."""

    root: Path
    """The sweep folder."""
    rows: list[dict[str, Any]]
    """One row per cell (:data:`hpcpolicy.sweep.table.SCHEMA`)."""
    ran: int
    """Cells compared in this run."""
    skipped: int
    """Cells whose report was already there."""
    paths: dict[str, Path]
    """``parquet`` and ``markdown``: the combined table."""


def _on_ray(spec: SweepSpec, todo: list[Cell], root: Path, address: str | None,
            cell_cpus: int, on_cell: OnCell | None) -> None:
    """The cells as Ray tasks; each result is reported as it comes."""
    from hpcpolicy.ray_support import connect

    ray = connect(address)
    task = ray.remote(num_cpus=cell_cpus, max_retries=2)(run_cell)
    pending = {task.remote(spec, cell, str(root)): cell for cell in todo}
    try:
        for done in range(1, len(todo) + 1):
            (ref,), _ = ray.wait(list(pending), num_returns=1)
            cell = pending.pop(ref)
            try:
                ray.get(ref)
            except HpcPolicyError as exc:  # Ray's error is also an instance of the cause
                cause = getattr(exc, "cause", exc)
                raise ConfigError(f"cell {cell.folder}: {cause}") from None
            if on_cell is not None:
                on_cell(cell, done, len(todo))
    finally:
        for ref in pending:
            ray.cancel(ref)


def sweep(spec: SweepSpec, out_dir: str | Path, *, backend: str = "local",
          address: str | None = None, cell_cpus: int = 1,
          on_cell: OnCell | None = None) -> SweepResult:
    """Run the grid's unfinished cells and write the combined table.

    Args:
        spec: The grid and its shared settings.
        out_dir: The sweep folder: a report folder per cell, ``sweep.parquet``, ``sweep.md``.
        backend: ``local`` (one cell after another here) or ``ray`` (Ray tasks).
        address: With ``ray``: a Ray cluster's address; None starts Ray here.
        cell_cpus: With ``ray``: cores each cell's task holds.
        on_cell: Called with each cell compared, how many are done and how many were to do.

    Raises:
        ConfigError: A cell folder holding a report of other settings, a cell that fails (the
            message names it), Ray missing or not answering.
    """
    from hpcpolicy.ray_support import check_backend

    check_backend(backend, address)
    if cell_cpus < 1:
        raise ConfigError(f"--cell-cpus {cell_cpus}: must be >= 1")
    root = Path(out_dir).resolve()
    cells = spec.cells()
    todo = [cell for cell in cells if not finished(spec, cell, root)]
    if backend == "ray" and todo:
        _on_ray(spec, todo, root, address, cell_cpus, on_cell)
    else:
        for done, cell in enumerate(todo, 1):
            try:
                run_cell(spec, cell, root)
            except HpcPolicyError as exc:
                raise type(exc)(f"cell {cell.folder}: {exc}") from None
            if on_cell is not None:
                on_cell(cell, done, len(todo))
    rows = [cell_row(spec, cell, root) for cell in cells]
    paths = write_table(rows, root, spec.metric)
    return SweepResult(Path(out_dir), rows, len(todo), len(cells) - len(todo), paths)
