"""A small, busy GPU partition and workload for the two-agent scheduler's tests."""

from __future__ import annotations

from pathlib import Path

from benchmarks.builders.gpu_jobs import write_gpu_table
from hpcpolicy.cluster import ClusterSpec
from hpcpolicy.cluster_io import load_cluster
from hpcpolicy.workload import Workload

SMALL_PARTITION_TOML = """\
name = "small-gpu"

[gpu]
spread_penalty = 0.2

[[groups]]
name = "a100"
count = 2
cores = 32
gpus = 4
gpu_type = "a100"
rack = "r1"

[[groups]]
name = "v100"
count = 2
cores = 32
gpus = 4
gpu_type = "v100"
gpu_speed = 0.5
rack = "r2"

[[groups]]
name = "h100"
count = 1
cores = 64
gpus = 8
gpu_type = "h100"
gpu_speed = 2.0
rack = "r3"
"""
"""Three GPU types on five nodes (24 GPUs): the 144-GPU test workload queues on it."""


def write_case(folder: Path, n: int = 300) -> tuple[Path, Path]:
    """A GPU job table and the small partition's spec file, in ``folder``."""
    spec = folder / "small-gpu.toml"
    spec.write_text(SMALL_PARTITION_TOML, encoding="utf-8")
    return write_gpu_table(folder / "gpu.parquet", n=n), spec


def load_case(folder: Path, n: int = 300) -> tuple[Workload, ClusterSpec, Path, Path]:
    """The workload and machine of :func:`write_case`, with their files."""
    table, spec = write_case(folder, n)
    return Workload.from_table(table), load_cluster(spec), table, spec
