"""Sweeps: a grid of what-if comparisons (logs x candidates x scenarios x seeds), one report
folder per cell and one table of every cell's verdict (``hpcpolicy sweep``).

Modules:

* :mod:`~hpcpolicy.sweep.spec`: ``SweepSpec``, the TOML file, and the grid's cells;
* :mod:`~hpcpolicy.sweep.cells`: one cell, the what-if report ``hpcpolicy whatif`` writes for it;
* :mod:`~hpcpolicy.sweep.table`: the combined table (Parquet and Markdown) read from the reports;
* :mod:`~hpcpolicy.sweep.runner`: ``sweep(...)``, the cells in this process or as Ray tasks.
"""

from __future__ import annotations

from hpcpolicy.sweep.runner import SweepResult, sweep
from hpcpolicy.sweep.spec import SweepSpec, load_spec

__all__ = ["SweepResult", "SweepSpec", "load_spec", "sweep"]
