"""The combined table of a sweep: ``sweep.parquet`` (one row per cell, every figure) and
``sweep.md`` (the same, to read), written together.

Example:
    >>> print(markdown([]).splitlines()[0])
    | log | candidate | scenario | seed | baseline | candidate | change | CI | verdict |
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import polars as pl

from hpcpolicy.atomic import replace_together

__all__ = ["SCHEMA", "markdown", "write_table"]

SCHEMA = {"log": pl.String, "candidate": pl.String, "scenario": pl.String, "seed": pl.Int64,
          "baseline_policy": pl.String, "metric": pl.String, "baseline": pl.Float64,
          "candidate_value": pl.Float64, "diff": pl.Float64, "ci_low": pl.Float64,
          "ci_high": pl.Float64, "rel_diff": pl.Float64, "rel_ci_low": pl.Float64,
          "rel_ci_high": pl.Float64, "windows": pl.Int64, "verdict": pl.String,
          "report": pl.String}
"""Columns of sweep.parquet: the cell, the primary metric's figures as report.json holds them
(``rel_*``: relative to the baseline), the comparison's verdict and the report folder."""


def _cell(text: str) -> str:
    """Log text in a Markdown table cell: pipes escaped, lines joined."""
    return " ".join(str(text).split()).replace("|", "\\|")


def _num(value: float | None, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def markdown(rows: Sequence[dict[str, Any]]) -> str:
    """The table in Markdown: one line per cell."""
    lines = ["| log | candidate | scenario | seed | baseline | candidate | change | CI | "
             "verdict |", "|---|---|---|---:|---:|---:|---:|---|---|"]
    for r in rows:
        ci = "-" if r["rel_ci_low"] is None or r["rel_ci_high"] is None else \
            f"{r['rel_ci_low']:+.1%} .. {r['rel_ci_high']:+.1%}"
        lines.append(" | ".join([
            f"| {_cell(Path(r['log']).name)}", _cell(r["candidate"]), _cell(r["scenario"]),
            str(r["seed"]), _num(r["baseline"], ".4g"), _num(r["candidate_value"], ".4g"),
            _num(r["rel_diff"], "+.1%"), ci, f"{r['verdict']} |"]))
    return "\n".join(lines) + "\n"


def write_table(rows: Sequence[dict[str, Any]], root: Path, metric: str) -> dict[str, Path]:
    """Write sweep.parquet and sweep.md in ``root``, replacing older ones together."""
    paths = {"parquet": root / "sweep.parquet", "markdown": root / "sweep.md"}
    frame = pl.DataFrame(list(rows), schema=SCHEMA)
    text = f"# Sweep: {metric}, each candidate against the baseline\n\n" + markdown(rows)
    with replace_together([paths["parquet"], paths["markdown"]]) as (parquet, md):
        frame.write_parquet(parquet)
        md.write_text(text, encoding="utf-8")
    return paths
