"""A small GPU workload for the GPU-partition tests: jobs of 1-8 GPUs on a loaded partition."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from benchmarks.builders.job_tables import job_table, write_job_table

GPU_PARTITION = Path(__file__).resolve().parents[2] / "examples" / "gpu-partition.toml"
"""The heterogeneous 30-node example partition (144 GPUs of three generations)."""


def write_gpu_table(path: Path, n: int = 400, seed: int = 0) -> Path:
    """``n`` GPU jobs arriving fast enough to queue on :data:`GPU_PARTITION`; some name the
    GPU type they ran on."""
    rng = np.random.default_rng(seed)
    gpus = rng.choice([1, 2, 4, 8], n, p=[0.5, 0.25, 0.15, 0.1])
    run = np.maximum(rng.lognormal(7.5, 1.2, n).astype(np.int64), 10)
    gap = float((gpus * run).mean()) / 144 / 1.3
    submit = np.cumsum(rng.exponential(gap, n)).astype(np.int64)
    types = rng.choice(["a100", "v100", "h100", ""], n)
    rows = [{"submit": int(submit[i] - submit[0]), "run_time_s": int(run[i]),
             "req_cpus": int(4 * gpus[i]), "req_gpus": int(gpus[i]),
             "req_gpu_type": str(types[i]) or None,
             "req_walltime_s": int(run[i] * 2), "user": f"u{i % 7}", "partition": "gpu"}
            for i in range(n)]
    return write_job_table(path, job_table(rows), [])
