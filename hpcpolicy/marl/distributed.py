"""The two-agent scheduler's DD-PPO workers under torchrun.

The same scheme as :mod:`hpcpolicy.ppo.ddppo`, whose worker group
(:class:`~hpcpolicy.ppo.ddppo.TorchDistComm`: env:// rendezvous, flattened-gradient
``all_reduce``, rank 0 writes) and checks are reused: every worker reads the run's
``launch.json`` (config, training data, provenance), loads the workload itself and runs
:func:`hpcpolicy.marl.train.run_marl` on its own episodes (windows drawn from ``(seed,
rank)``). Each agent's gradients are averaged over the workers, weighted by each worker's
share of that agent's decisions, so the parameters stay identical everywhere. Rollouts are
whole episodes, so there is no straggler cut-off (``sync_frac`` is 1).

Example:
    >>> launch(MarlConfig(), data, "runs/marl", workers=2)     # doctest: +SKIP
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hpcpolicy.atomic import write_json
from hpcpolicy.docload import read_json
from hpcpolicy.errors import ConfigError
from hpcpolicy.learn.runs import RunPaths
from hpcpolicy.marl.config import MarlConfig
from hpcpolicy.marl.data import TrainingData
from hpcpolicy.ppo.ddppo import (
    LAUNCH_FILE,
    TorchDistComm,
    precheck_launch,
    run_workers,
    worker_entry,
)
from hpcpolicy.ppo.ppo import TrainResult

__all__ = ["launch", "worker_main"]


def launch(cfg: MarlConfig, data: TrainingData, run_dir: str | Path, *, workers: int,
           provenance: Mapping[str, Any] | None = None, resume: bool = False) -> TrainResult:
    """Train with ``workers`` processes on this machine (``torchrun --standalone``).

    Workers inherit this process's environment, with ``OMP_NUM_THREADS`` set to
    ``cfg.torch_threads``; Ctrl-C reaches them too (they checkpoint and exit).

    Raises:
        ConfigError: An existing run without ``resume``, or a mismatching resume.
        RuntimeError: A worker failed (its traceback is in the output above).
    """
    paths = RunPaths(run_dir)
    precheck_launch(cfg, paths, workers, resume)
    write_json(paths.root / LAUNCH_FILE, {"config": cfg.to_dict(), "data": data.to_dict(),
                                          "provenance": dict(provenance or {})})
    (paths.root / "result.json").unlink(missing_ok=True)
    return run_workers("hpcpolicy.marl.distributed", paths, workers, cfg, resume,
                       "two-agent DD-PPO")


def worker_main(run_dir: str | Path, resume: bool = False) -> TrainResult:
    """Body of one torchrun worker: read launch.json, join the group, train.

    Raises:
        ConfigError: launch.json is missing or not a two-agent launch.
    """
    from hpcpolicy.marl.train import run_marl

    path = Path(run_dir) / LAUNCH_FILE
    if not path.is_file():
        raise ConfigError(f"{path} not found; start two-agent workers with `hpcpolicy train "
                          "--algo marl --workers N`")
    spec = read_json(path, "two-agent launch file")
    if "data" not in spec:
        raise ConfigError(f"{path} is not a two-agent launch (written by --algo ddppo?)")
    cfg = MarlConfig.from_dict(spec["config"])
    data = TrainingData.from_dict(spec["data"])
    workload, machine = data.load()
    comm = TorchDistComm(cfg)

    def progress(row: Mapping[str, float]) -> None:
        print(f"update {row['update']:.0f}  decisions {row['global_step']:.0f}  "
              f"{row['sps']:.0f}/s  bsld {row['env/bsld']:.4g}", file=sys.stderr, flush=True)

    finished = False
    try:
        result = run_marl(cfg, data.env, workload, machine, run_dir, comm, comm.device,
                          resume=resume, provenance=spec["provenance"],
                          progress=progress if comm.rank == 0 else None)
        finished = True
        return result
    finally:
        comm.close(finished)


def _main(argv: list[str] | None = None) -> None:
    """``python -m hpcpolicy.marl.distributed RUN_DIR [--resume]``, started by torchrun."""
    worker_entry("hpcpolicy.marl.distributed", "One two-agent DD-PPO worker.", worker_main,
                 argv)


if __name__ == "__main__":
    _main()
