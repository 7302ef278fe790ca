"""A tiny Alibaba-like GPU-sharing trace (an ``openb`` pod list and node list), busy enough
that pods queue, for the tests of the sharing allocators in simulate, evaluate and whatif."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from cli_helpers import invoke

NODES = (  # sn, cpu_milli, memory_mib, gpu, model: 40 GPUs on 8 nodes of three models
    *((f"t4-{i}", 32000, 131072, 2, "T4") for i in range(4)),
    *((f"v100-{i}", 96000, 393216, 8, "V100M32") for i in range(2)),
    *((f"g2-{i}", 96000, 786432, 8, "G2") for i in range(2)),
)


def write_sharing_trace(folder: Path, pods: int = 150, seed: int = 0) -> Path:
    """Write ``openb_node_list_all_node.csv`` and ``openb_pod_list_tiny.csv`` in ``folder``
    and ingest them; returns the job table (its cluster spec is ``<table stem>.cluster.toml``).

    Pods of whole GPUs (1 or 2), shared GPUs (250, 500, 700 thousandths) and CPU only arrive
    every 20 s on average and run 20-70 min: about 2.5 times the GPUs the cluster has.
    """
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "openb_node_list_all_node.csv").write_text(
        "sn,cpu_milli,memory_mib,gpu,model\n"
        + "".join(f"{sn},{cpu},{mem},{gpu},{model}\n" for sn, cpu, mem, gpu, model in NODES))
    rng = np.random.default_rng(seed)
    shape = rng.choice(5, pods, p=[0.3, 0.1, 0.25, 0.25, 0.1])
    num = np.array([1, 2, 1, 1, 0])[shape]
    milli = np.where(shape >= 2, rng.choice([250, 500, 700], pods), 1000)
    milli = np.where(num == 0, 0, milli)
    cpu = rng.choice([2000, 4000, 8000, 16000], pods)
    mem = rng.choice([8192, 16384, 65536], pods)
    submit = np.cumsum(rng.integers(1, 40, pods))
    run = rng.integers(1200, 4200, pods)
    lines = ["name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,"
             "creation_time,deletion_time,scheduled_time"]
    lines += [f"pod-{i:04d},{cpu[i]},{mem[i]},{num[i]},{milli[i]},,LS,Succeeded,{submit[i]},"
              f"{submit[i] + run[i]},{submit[i]}" for i in range(pods)]
    (folder / "openb_pod_list_tiny.csv").write_text("\n".join(lines) + "\n")
    table = folder / "tiny.parquet"
    result = invoke("ingest", str(folder / "openb_pod_list_tiny.csv"), "-o", str(table))
    assert result.exit_code == 0, result.output
    return table
