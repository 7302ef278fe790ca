"""The inflation experiment over allocators and seeds, as one table, and its comparison.

:func:`inflation_table` runs :func:`~hpcpolicy.gpu.inflation.run_inflation` for every
allocator and seed and gives one row per (allocator, seed) with the allocated GPU share (%) at
each percent asked for, and the cluster's fragmentation (% of the GPUs) at the same points.
:func:`compare_expected` sets the means over seeds beside the expected figures of the paper's
artifact (a CSV of the same shape: ``allocator, seed, <percent>...``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import polars as pl

from hpcpolicy.errors import InputFormatError
from hpcpolicy.gpu.allocators import LEARNED
from hpcpolicy.gpu.inflation import InflationConfig, InflationRun, inflation_curve, run_inflation
from hpcpolicy.gpu.sharing import GPU_MILLI, SharingNodes, SharingPods
from hpcpolicy.ingest.text_chunks import read_bounded

__all__ = ["compare_expected", "fragmentation_curve", "inflation_table", "read_expected"]


def fragmentation_curve(run: InflationRun, percents: Sequence[int]) -> np.ndarray:
    """The cluster's fragmentation (% of its GPUs) when the arrived share, rounded to a whole
    percent as :func:`~hpcpolicy.gpu.inflation.inflation_curve` does, first reaches each of
    ``percents`` (NaN past the run's end)."""
    share = np.round(run.arrived / (run.total_gpus * GPU_MILLI / 100.0))
    out = np.full(len(percents), np.nan)
    for k, p in enumerate(percents):
        at = int(np.searchsorted(share, p))
        if at < len(share):
            out[k] = run.fragmentation[at] / (run.total_gpus * GPU_MILLI) * 100.0
    return out


def inflation_table(nodes: SharingNodes, pods: SharingPods, allocators: Sequence[str],
                    seeds: Sequence[int], percents: Sequence[int], ratio: float = 1.3,
                    weights: tuple[float, ...] = ()) -> pl.DataFrame:
    """One row per (allocator, seed): ``alloc_<p>`` and ``frag_<p>`` for each ``p``.

    ``weights`` are the ``learned`` allocator's, when it is among ``allocators``.

    Example:
        >>> import numpy as np
        >>> from hpcpolicy.gpu.sharing import SharingNodes, SharingPods
        >>> nodes = SharingNodes(("n",), np.array([8000]), np.array([64]), np.array([2]),
        ...                      np.array([0]), ("T4",))
        >>> one = np.ones(1, dtype=np.int64)
        >>> pods = SharingPods(("p",), one, one, one, np.array([500]), np.ones((1, 1), bool))
        >>> inflation_table(nodes, pods, ["bestfit"], [1], [50], 1.0)["alloc_50"].to_list()
        [50.0]
    """
    rows = []
    for name in allocators:
        for seed in seeds:
            cfg = InflationConfig(allocator=name, ratio=ratio, seed=seed,
                                  weights=weights if name == LEARNED else ())
            run = run_inflation(nodes, pods, cfg)
            alloc = inflation_curve(run, np.asarray(percents, dtype=np.int64))
            frag = fragmentation_curve(run, percents)
            row: dict[str, object] = {"allocator": name, "seed": seed}
            row.update({f"alloc_{p}": float(a) for p, a in zip(percents, alloc, strict=True)})
            row.update({f"frag_{p}": float(f) for p, f in zip(percents, frag, strict=True)})
            rows.append(row)
    return pl.DataFrame(rows)


def read_expected(path: Path) -> pl.DataFrame:
    """The expected figures: ``allocator, seed`` and one column per percent ('#' lines skipped).

    Raises:
        InputFormatError: unreadable, or without ``allocator`` and ``seed`` columns.
    """
    try:
        frame = pl.read_csv(read_bounded(path, "a table of expected figures"),
                            comment_prefix="#")
    except (OSError, pl.exceptions.PolarsError) as exc:
        raise InputFormatError(f"{path}: cannot read the expected figures ({exc}); give a "
                               "CSV with columns allocator, seed, <percent>...") from None
    if not {"allocator", "seed"} <= set(frame.columns):
        raise InputFormatError(f"{path}: columns allocator and seed are missing; give a CSV "
                               "with columns allocator, seed, <percent>...")
    return frame


def compare_expected(table: pl.DataFrame, expected: pl.DataFrame,
                     percents: Sequence[int]) -> pl.DataFrame:
    """Per allocator and percent: our mean over seeds, the expected mean, and the difference.

    Only allocators present in both are compared.
    """
    ours = table.group_by("allocator").agg(
        [pl.col(f"alloc_{p}").mean().alias(str(p)) for p in percents])
    theirs = expected.group_by("allocator").agg(
        [pl.col(str(p)).mean() for p in percents])
    long = [ours.unpivot(index="allocator", variable_name="percent", value_name="ours"),
            theirs.unpivot(index="allocator", variable_name="percent", value_name="expected")]
    both = long[0].join(long[1], on=["allocator", "percent"])
    return (both.with_columns(pl.col("percent").cast(pl.Int64),
                              (pl.col("ours") - pl.col("expected")).alias("diff"))
            .sort("allocator", "percent"))
