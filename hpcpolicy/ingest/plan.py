"""The contract between a log reader and the ingest pipeline.

A reader turns one input file into a :class:`ReaderPlan`: a lazy frame with one row per *input
row* (header and comment lines excluded), holding

* every canonical job-table column (:data:`hpcpolicy.schema.JOB_COLUMNS`), already cast;
* ``_file`` (str): the input path as given; ``_line`` (int): 1-based line number in the file;
* ``_raw`` (str): the input row's text, kept for the rejects table;
* ``_reason`` (str or null): null for a kept job, :data:`STEP_FOLDED` for a step row folded
  into its job, or a reject reason code from :mod:`hpcpolicy.ingest.reasons`;
* optionally ``_repair_<code>`` (bool) columns: True where a kept row was repaired by rule
  ``<code>`` (also listed in reasons), so repairs are counted as well as rejects.

The pipeline then writes kept rows, rejected rows and the counts in one streaming pass, so
``rows read = jobs kept + rows rejected + step rows folded`` holds by construction.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import polars as pl

__all__ = ["INTERNAL_COLUMNS", "REPAIR_PREFIX", "STEP_FOLDED", "ReaderPlan"]

STEP_FOLDED = "step_folded"
"""``_reason`` of a job-step row (``123.batch``, ``123.0``) folded into its job."""
REPAIR_PREFIX = "_repair_"
INTERNAL_COLUMNS = ("_file", "_line", "_raw", "_reason")


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
