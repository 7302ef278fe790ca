"""The contract between a log reader and the ingest pipeline.

A reader turns one input file into a :class:`ReaderPlan`: a lazy frame with one row per *input
row* (header and comment lines excluded; see ``_rows`` for rows folded together), holding

* every canonical job-table column (:data:`hpcpolicy.schema.JOB_COLUMNS`), already cast;
* ``_file`` (str): the input path as given; ``_line`` (int): 1-based line number in the file;
* ``_raw`` (str): the input row's text, kept for the rejects table;
* ``_reason`` (str or null): null for a kept job, :data:`STEP_FOLDED` for a step row folded
  into its job, or a reject reason code from :mod:`hpcpolicy.ingest.reasons`;
* optionally ``_repair_<code>`` (bool) columns: True where a kept row was repaired by rule
  ``<code>`` (also listed in reasons), so repairs are counted as well as rejects;
* optionally ``_rows`` (int): how many input rows the row stands for, 1 when absent. A reader
  may give all the step rows of a stretch of the file that are folded into their jobs one
  row (``_reason`` :data:`STEP_FOLDED`, ``_rows`` = how many): they need no output of their
  own, and one row instead of thousands spares the pass most of its work.

The pipeline then writes kept rows, rejected rows and the counts in one streaming pass, so
``rows read = jobs kept + rows rejected + step rows folded`` holds by construction. A rule that
needs the whole file before any row can be judged (sacct's superseded records and orphan
steps) is checked after the pass by ``ReaderPlan.after_pass``, which may add notes or ask for
a second pass that applies what the first one found.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from hpcpolicy.ingest.cluster_toml import ClusterDoc

__all__ = ["INTERNAL_COLUMNS", "REPAIR_PREFIX", "ROWS", "STEP_FOLDED", "PassCheck", "ReaderPlan"]

STEP_FOLDED = "step_folded"
"""``_reason`` of a job-step row (``123.batch``, ``123.0``) folded into its job."""
REPAIR_PREFIX = "_repair_"
INTERNAL_COLUMNS = ("_file", "_line", "_raw", "_reason")
ROWS = "_rows"
"""Optional column: input rows a row stands for."""


@dataclass
class ReaderPlan:
    """What a reader hands to the pipeline for one input file."""

    frame: pl.LazyFrame
    """Canonical columns + the internal columns described in the module docstring."""
    source_format: str
    """Format name as given to ``--format`` (``swf``, ``sacct``, ...)."""
    header: dict[str, Any] = field(default_factory=dict)
    """Facts stated by the file itself (SWF header keys, sacct column list, ...)."""
    inferred: dict[str, Any] = field(default_factory=dict)
    """Facts the reader had to infer or assume, each with how (e.g. machine size)."""
    notes: list[str] = field(default_factory=list)
    """Plain-language notes for the user: what can and cannot be derived from this file."""
    cluster: ClusterDoc | None = None
    """The machine the log ran on, when the input comes with a description of it (the
    Alibaba trace's node list); the pipeline writes it as ``NAME.cluster.toml``."""
    after_pass: Callable[[int], PassCheck] | None = None
    """Called with the rows read after a pass over the whole file, for what only the whole file
    shows (records superseded later in it, a header's record count to compare); None when
    nothing does."""


@dataclass(frozen=True)
class PassCheck:
    """What a reader learnt from a pass over its whole file."""

    rerun: ReaderPlan | None = None
    """The plan of a second pass that applies what the first one found (whose results it
    replaces), or None when the pass stands."""
    notes: tuple[str, ...] = ()
    """Plain-language notes that needed the whole file."""
