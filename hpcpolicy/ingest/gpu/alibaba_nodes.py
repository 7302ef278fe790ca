"""The cluster spec of the Alibaba GPU trace, from its node list (``openb_node_list_*.csv``).

The node list has one machine per row: ``sn`` (its name), ``cpu_milli`` (CPUs in
thousandths), ``memory_mib``, ``gpu`` (GPU count) and ``model`` (GPU model, empty on CPU-only
nodes). Nodes of the same shape (cores, memory, GPUs, model) become one
:class:`~hpcpolicy.cluster.NodeGroup`; the GPU type is the model in lower case. The list
says nothing of racks or GPU speeds: racks are left out and ``gpu_speed`` is 1.0, a
placeholder the written file's header asks the reader to replace.

The spec must be exact, so a bad row is an error naming its line, not a reject.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from hpcpolicy.atomic import file_sha256
from hpcpolicy.cluster import ClusterSpec, NodeGroup
from hpcpolicy.errors import InputFormatError
from hpcpolicy.ingest.cluster_toml import ClusterDoc
from hpcpolicy.ingest.csv_scan import read_header, scan_csv
from hpcpolicy.ingest.gpu.csv_reader import MISSING_WORDS
from hpcpolicy.ingest.gpu.layouts import ALIBABA_NODES
from hpcpolicy.ingest.reasons import describe
from hpcpolicy.limits import Limits

__all__ = ["NODE_LIST_NAME", "read_node_list"]

NODE_LIST_NAME = "openb_node_list_all_node.csv"
"""The node list's file name in the trace; looked for beside a pod list."""

_SHAPE = ("cores", "mem_mib", "gpus", "gpu_type")


def _fail(path: Path, row: dict[str, Any], what: str) -> InputFormatError:
    return InputFormatError(f"{path}: line {row['_line']}: {what}; correct the node list or "
                            "leave it out (no cluster spec is then written)")


def _first(rows: pl.DataFrame, bad: pl.Expr) -> dict[str, Any] | None:
    hit = rows.filter(bad.fill_null(False)).head(1)
    return hit.row(0, named=True) if hit.height else None


def _checked(path: Path, rows: pl.DataFrame) -> pl.DataFrame:
    """The rows with whole-number columns and the GPU type; raises at the first bad row."""
    if rows.height == 0:
        raise InputFormatError(f"{path}: the node list has no nodes")
    row = _first(rows, pl.col("_reason").is_not_null())
    if row is not None:
        raise _fail(path, row, describe(row["_reason"]))
    for column in ("cpu_milli", "memory_mib", "gpu"):
        value = pl.col(column).cast(pl.Int64, strict=False)
        row = _first(rows, value.is_null() | (value < 0))
        if row is not None:
            raise _fail(path, row, f"column {column!r} holds {row[column]!r}, not a whole "
                        "number >= 0")
    model = pl.when(~pl.col("model").is_in(MISSING_WORDS)).then(pl.col("model").str.to_lowercase())
    typed = rows.with_columns(
        pl.col("cpu_milli", "memory_mib", "gpu").cast(pl.Int64),
        pl.when(pl.col("gpu").cast(pl.Int64) > 0).then(model).alias("gpu_type"),
    )
    checks = [
        (pl.col("sn").is_in(MISSING_WORDS), "column 'sn' (the node name) is empty"),
        ((pl.col("cpu_milli") % 1000 != 0) | (pl.col("cpu_milli") == 0),
         "cpu_milli is not a whole number of CPUs (a positive multiple of 1000)"),
        ((pl.col("gpu") > 0) & pl.col("gpu_type").is_null(),
         "the node has GPUs but column 'model' is empty; name the GPU model"),
    ]
    for bad, what in checks:
        row = _first(typed, bad)
        if row is not None:
            raise _fail(path, row, f"{what} (node {row['sn']!r})")
    row = _first(typed, pl.col("sn").is_first_distinct().not_())
    if row is not None:
        first = typed.filter(pl.col("sn") == row["sn"])["_line"][0]
        raise _fail(path, row, f"node {row['sn']!r} is listed twice, first on line {first}")
    return typed


def _group_name(cores: int, mem_mib: int, gpus: int, gpu_type: str | None) -> str:
    """``g2x8-96c-384g`` (8 G2 GPUs, 96 cores, 384 GiB) or ``cpu-32c-256g``."""
    mem = f"{mem_mib // 1024}g" if mem_mib % 1024 == 0 else f"{mem_mib}m"
    kind = f"{gpu_type}x{gpus}" if gpus else "cpu"
    return f"{kind}-{cores}c-{mem}"


def read_node_list(path: Path, limits: Limits | None = None) -> ClusterDoc:
    """The cluster spec of an Alibaba GPU-trace node list, with its file's comment header.

    Raises:
        InputFormatError: the file is missing, empty or damaged, breaks ``limits`` (default
            :class:`Limits()`), a column is missing, or a row is bad (the message names the
            line and the column).

    Example:
        >>> doc = read_node_list(Path("openb_node_list_all_node.csv"))  # doctest: +SKIP
        >>> doc.spec.total_nodes, doc.spec.total_gpus  # doctest: +SKIP
        (1523, 6212)
    """
    rows = _checked(path, scan_csv(path, read_header(path, ALIBABA_NODES, limits)).collect())
    shapes = (
        rows.group_by((pl.col("cpu_milli") // 1000).alias("cores"),
                      pl.col("memory_mib").alias("mem_mib"), pl.col("gpu").alias("gpus"),
                      "gpu_type")
        .agg(pl.len().alias("count"))
        .sort(["count", *_SHAPE], descending=[True, False, False, False, False],
              nulls_last=False)
    )
    groups = tuple(
        NodeGroup(name=_group_name(s["cores"], s["mem_mib"], s["gpus"], s["gpu_type"]),
                  count=s["count"], cores=s["cores"], mem_mib=s["mem_mib"], gpus=s["gpus"],
                  gpu_type=s["gpu_type"])
        for s in shapes.iter_rows(named=True)
    )
    spec = ClusterSpec(groups, name=path.stem, source=str(path), notes=(
        f"made by hpcpolicy ingest from the Alibaba GPU-trace node list {path.name}",
        "gpu_speed 1.0 is a placeholder for every GPU type, not a measurement",
    ))
    by_type: dict[str, int] = {}
    for g in groups:
        if g.gpu_type:
            by_type[g.gpu_type] = by_type.get(g.gpu_type, 0) + g.count * g.gpus
    types = ", ".join(f"{t} {n:,}" for t, n in sorted(by_type.items()))
    comments = (
        "Cluster spec written by `hpcpolicy ingest` from the Alibaba GPU-trace node list",
        f"  {path} (sha256 {file_sha256(path)})",
        f"{spec.total_nodes:,} nodes in {len(groups)} groups, one per distinct shape (cores, "
        "memory, GPUs, GPU model):",
        f"{spec.total_cores:,} cores, {spec.total_gpus:,} GPUs ({types or 'none'}).",
        "The node list names no racks, so no group has one.",
        "gpu_speed = 1.0 for every GPU type is a PLACEHOLDER, not a measurement: replace it",
        "with your benchmark ratios before you compare GPU types.",
    )
    return ClusterDoc(spec, comments)
