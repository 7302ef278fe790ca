"""The fields of a sacct export that the job-table expressions read, handed out as columns.

The expressions of :mod:`hpcpolicy.ingest.sacct.columns` ask a :class:`Fields` for what they
need, before the file is scanned; the scan (:mod:`hpcpolicy.ingest.sacct.scan`) then copies or
parses exactly that. A field is read either as its text (:meth:`Fields.get`) or through one of
the compiled parsers of :mod:`hpcpolicy.ingest.sacct.parse` (whole numbers, timestamps, TRES
entries), whose results come with a status. Rejected rows have no field values (only the job
id's text).

Example:
    >>> from hpcpolicy.ingest.sacct.layout import SacctLayout
    >>> layout = SacctLayout(("JobID", "Submit", "State"), "parsable2", "JobID|Submit|State",
    ...                      2, "iso")
    >>> fields = Fields(layout)
    >>> submit, status = fields.time("Submit")
    >>> fields.get("State").meta.output_name(), fields.text_columns()
    ('_t2', ['_t2'])
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
import polars as pl

from hpcpolicy.ingest.sacct.kernel import ENTRY, GPU, INT, NONEMPTY, TIME
from hpcpolicy.ingest.sacct.layout import SacctLayout
from hpcpolicy.ingest.sacct.parse import BAD, OK
from hpcpolicy.ingest.slurm_fields import MISSING

__all__ = ["Fields"]


@dataclass
class Fields:
    """The fields in use and how each is read (text, or parsed)."""

    layout: SacctLayout
    used: dict[int, str] = field(default_factory=dict)
    """Field index -> the frame column holding its text (null when empty)."""
    parsed: list[tuple[int, int, str]] = field(default_factory=list)
    """(field index, kind from :mod:`hpcpolicy.ingest.sacct.kernel`, TRES key) per parsed
    output; output ``j`` fills columns ``_f<j>`` (status) and ``_x<j>`` / ``_n<j>``."""

    def get(self, name: str) -> pl.Expr | None:
        """Text of column ``name`` (null where empty), or None if the export lacks it."""
        i = self.layout.index(name)
        if i is None:
            return None
        self.used[i] = f"_t{i}"
        return pl.col(f"_t{i}")

    def _parse(self, name: str, kind: int, key: str = "") -> int | None:
        i = self.layout.index(name)
        if i is None:
            return None
        spec = (i, kind, key)
        if spec not in self.parsed:
            self.parsed.append(spec)
        return self.parsed.index(spec)

    def integer(self, name: str) -> tuple[pl.Expr, pl.Expr] | None:
        """(value, True where the text is not a whole number) of column ``name``."""
        j = self._parse(name, INT)
        if j is None:
            return None
        return (pl.when(pl.col(f"_f{j}") == OK).then(pl.col(f"_n{j}")),
                pl.col(f"_f{j}") == BAD)

    def time(self, name: str) -> tuple[pl.Expr, pl.Expr] | None:
        """(the wall-clock time as a zone-less datetime in ms, status) of column ``name``:
        status 0 for empty or "not known", 1 for a timestamp, 2 for other text."""
        j = self._parse(name, TIME)
        if j is None:
            return None
        naive = (pl.col(f"_n{j}") * 1000).cast(pl.Datetime("ms"))
        return pl.when(pl.col(f"_f{j}") == OK).then(naive), pl.col(f"_f{j}")

    def nonempty(self, name: str) -> pl.Expr | None:
        """True where column ``name`` is not empty."""
        j = self._parse(name, NONEMPTY)
        return None if j is None else pl.col(f"_f{j}") == OK

    def entry(self, name: str, key: str) -> tuple[pl.Expr, pl.Expr] | None:
        """(value text, whether the entry exists) of the first ``key=`` entry of the TRES
        list in column ``name``; the text is null where empty or absent."""
        j = self._parse(name, ENTRY, key)
        return None if j is None else (pl.col(f"_x{j}"), pl.col(f"_f{j}") == OK)

    def gpu(self, name: str) -> tuple[pl.Expr, pl.Expr, pl.Expr] | None:
        """GPUs of the TRES list in column ``name``: (type of the first GPU entry, count text:
        the ``gres/gpu=N`` entry's, else the first ``gres/gpu:TYPE=N``'s, whether either
        exists)."""
        j = self._parse(name, GPU)
        if j is None:
            return None
        return pl.col(f"_x{j}_type"), pl.col(f"_x{j}"), pl.col(f"_f{j}") == OK

    def indexes(self) -> list[int]:
        """The fields read as text, in file order."""
        return sorted(self.used)

    def text_columns(self) -> list[str]:
        """Columns the scan writes as text after ``_raw``, in order."""
        texts = [self.used[i] for i in self.indexes()]
        for j, (_, kind, _) in enumerate(self.parsed):
            texts += {ENTRY: [f"_x{j}"], GPU: [f"_x{j}_type", f"_x{j}"]}.get(kind, [])
        return texts

    def number_columns(self) -> list[str]:
        """Columns of parsed numbers (int64), in the order the scan fills them."""
        return [f"_n{j}" for j, (_, kind, _) in enumerate(self.parsed) if kind in (INT, TIME)]

    def spec(self) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.uint8],
                            npt.NDArray[np.int64], int]:
        """(parsed outputs, packed words, word ends, words meaning "not known") for the scan:
        the words are :data:`MISSING`, then each TRES key."""
        keys = list(dict.fromkeys(key for _, kind, key in self.parsed if kind == ENTRY))
        words = [w.encode() for w in MISSING if w] + [k.encode() for k in keys]
        n_missing = len(words) - len(keys)
        rows = [(i, kind, n_missing + keys.index(key) if kind == ENTRY else 0)
                for i, kind, key in self.parsed]
        return (np.array(rows, dtype=np.int64).reshape(-1, 3),
                np.frombuffer(b"".join(words), dtype=np.uint8),
                np.cumsum([len(w) for w in words]).astype(np.int64), n_missing)
