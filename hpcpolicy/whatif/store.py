"""Where a what-if keeps its runs' outcome tables: on disk, one Arrow IPC file per run.

A replay of a 10 M-job log has a 1.3 GB outcome table, and a what-if with two candidates
and two scenarios makes nine: together they do not fit in memory. So each table is written
once, as it comes out of its replay, to an uncompressed Arrow IPC file (a copy of the
columns, nothing to encode), and read back a few columns at a time by the comparisons, the
plots and the report's Parquet file. Columns that several runs share (the jobs' names) can
be stored once and read beside each run's own (:meth:`OutcomeStore.scan`). The folder lives
in the system's temporary folder (``TMPDIR``) and is removed with the last
:class:`OutcomeStore` that refers to it.
"""

from __future__ import annotations

import shutil
import tempfile
import weakref
from pathlib import Path
from typing import TYPE_CHECKING

from hpcpolicy.atomic import as_os_error

if TYPE_CHECKING:
    import polars as pl

__all__ = ["OutcomeStore"]


class OutcomeStore:
    """A temporary folder of outcome tables, removed when the store is garbage-collected
    (or at :meth:`close`).

    Example:
        >>> import polars as pl
        >>> store = OutcomeStore()
        >>> part = store.put(pl.DataFrame({"wait": [1, 2]}))
        >>> store.scan(part).select("wait").collect()["wait"].to_list()
        [1, 2]
        >>> store.close()
    """

    def __init__(self) -> None:
        try:
            self.folder = Path(tempfile.mkdtemp(prefix="hpcpolicy-whatif-"))
        except OSError as exc:  # name the folder: TMPDIR, not the report's
            raise as_os_error(exc, Path(tempfile.gettempdir())) from None
        self._remove = weakref.finalize(self, shutil.rmtree, self.folder, ignore_errors=True)
        self._count = 0

    def put(self, frame: pl.DataFrame) -> Path:
        """Write ``frame`` to a new file of the store; returns its path."""
        path = self.folder / f"run{self._count}.arrow"
        self._count += 1
        try:
            frame.write_ipc(path, compression="uncompressed")
        except Exception as exc:  # Polars reports a full TMPDIR as "... (os error 28)"
            raise as_os_error(exc, path) from None
        return path

    def scan(self, *paths: Path) -> pl.LazyFrame:
        """Stored tables of as many rows side by side, read lazily (only the columns a query
        selects are read)."""
        import polars as pl

        return pl.concat([pl.scan_ipc(path) for path in paths], how="horizontal")

    def close(self) -> None:
        """Remove the folder now."""
        self._remove()
