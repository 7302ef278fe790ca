"""The two GPU workloads of the GPU-partition benchmarks, built once into a cache folder.

* ``hpc2n-gpu``: ``../shared/tools/swf2sacct.py --gpus`` over the real HPC2N trace (seed 0)
  gives a Slurm export in which about 10 % of the jobs have 1-8 GPUs (40 % of them with a
  logged type: a100, v100 or h100); ``hpcpolicy ingest`` reads it; the GPU jobs are kept. They
  are replayed on ``examples/gpu-partition.toml`` (30 nodes in racks of 8, three GPU
  generations, 144 GPUs). As logged they would load those GPUs about 5 %, so arrivals are
  compressed (inter-arrival times divided by ``load``).
* ``alibaba``: the Alibaba GPU cluster trace 2023 (``openb_pod_list_default.csv``) as
  ``hpcpolicy ingest`` reads it, with the cluster spec it makes from the node list. On all
  1,523 nodes the pods load the GPUs about 0.1 %, and 90 % of them arrive in the last 30
  days; so the pods created from day ``since_day`` on are replayed on ``fraction`` of the
  nodes of every node type (at least one), with arrivals compressed by ``load``.

Each table keeps the job-table metadata, so every command reads it.
"""

from __future__ import annotations

import math
import subprocess
import sys
import tomllib
from datetime import timedelta
from pathlib import Path

import polars as pl

from benchmarks._common import DATA, OPENB_PODS, ROOT, TOOLS

GPU_PARTITION = ROOT / "examples" / "gpu-partition.toml"


def _ingest(source: Path, table: Path) -> None:
    from hpcpolicy.ingest import IngestConfig, ingest

    ingest([source], table, IngestConfig(overwrite=True))


def _compressed(table: Path, out: Path, load: float, keep: pl.Expr | None = None) -> Path:
    """``table``'s jobs (those matching ``keep``) with inter-arrival times divided by ``load``."""
    meta = {k: v for k, v in pl.read_parquet_metadata(table).items()
            if k.startswith("hpcpolicy.")}
    frame = pl.read_parquet(table)
    if keep is not None:
        frame = frame.filter(keep)
    t0 = frame["submit_time"].min()

    def squeeze(name: str) -> pl.Expr:
        return ((pl.col(name) - t0) / load + t0).alias(name)

    # Logged starts move with the submits: the logged waits stay as they were.
    frame = frame.with_columns(
        squeeze("submit_time"), squeeze("eligible_time"),
        (squeeze("submit_time") + pl.duration(seconds=pl.col("wait_time_s"))).alias(
            "start_time"),
        (squeeze("submit_time") + pl.duration(seconds=pl.col("wait_time_s") + pl.col(
            "run_time_s"))).alias("end_time"))
    frame.write_parquet(out, metadata=meta)
    return out


def hpc2n_gpu(cache: Path, load: float) -> tuple[Path, Path]:
    """(job table, cluster spec) of the HPC2N GPU workload at ``load`` times its arrivals."""
    cache.mkdir(parents=True, exist_ok=True)
    export = cache / "hpc2n-gpus.sacct.txt"
    if not export.exists():
        subprocess.run([sys.executable, str(TOOLS / "swf2sacct.py"),
                        str(DATA / "HPC2N-2002-2.2-cln.swf.gz"), "--gpus", "--seed", "0",
                        "-o", str(export)], check=True)
    full = cache / "hpc2n-gpus.parquet"
    if not full.exists():
        _ingest(export, full)
    out = cache / f"hpc2n-gpu-load{load:g}.parquet"
    if not out.exists():
        _compressed(full, out, load, pl.col("req_gpus") > 0)
    return out, GPU_PARTITION


def alibaba(cache: Path, load: float, fraction: float,
            since_day: int = 119) -> tuple[Path, Path]:
    """(job table, cluster spec) of the Alibaba trace on ``fraction`` of its nodes."""
    cache.mkdir(parents=True, exist_ok=True)
    full = cache / "alibaba.parquet"
    if not full.exists():
        _ingest(DATA / OPENB_PODS, full)
    out = cache / f"alibaba-day{since_day}-load{load:g}.parquet"
    if not out.exists():
        since = pl.col("submit_time").min() + timedelta(days=since_day)
        _compressed(full, out, load, pl.col("submit_time") >= since)
    spec = cache / f"alibaba-nodes{fraction:g}.toml"
    if not spec.exists():
        doc = tomllib.loads(full.with_suffix(".cluster.toml").read_text())
        lines = [f'name = "alibaba-{fraction:g}"',
                 f'notes = ["{fraction:g} of every node type of the Alibaba 2023 trace\'s '
                 'cluster (at least one node each); gpu_speed 1.0 placeholders"]']
        for group in doc["groups"]:
            group["count"] = max(1, math.ceil(group["count"] * fraction))
            lines.append("\n[[groups]]")
            lines += [f"{k} = {v!r}".replace("'", '"') for k, v in group.items()]
        spec.write_text("\n".join(lines) + "\n")
    return out, spec
