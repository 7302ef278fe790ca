"""From a job table to a trained two-agent artifact: what ``hpcpolicy train --algo marl``
calls.

:func:`train_table` loads the :class:`~hpcpolicy.marl.data.TrainingData` (what the agents
train on), checks it and trains in this process (one worker) or in torchrun workers
(:mod:`hpcpolicy.marl.distributed`).

Example:
    >>> train_table(TrainingData("jobs.parquet"), MarlConfig(), "runs/m")  # doctest: +SKIP
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from hpcpolicy.errors import ConfigError
from hpcpolicy.marl.config import MarlConfig
from hpcpolicy.marl.data import TrainingData

if TYPE_CHECKING:
    from hpcpolicy.ppo.ppo import Progress, TrainResult

__all__ = ["TrainingData", "train_table"]  # TrainingData re-exported for its old importers


def train_table(data: TrainingData, cfg: MarlConfig, run_dir: str | Path, *, workers: int = 1,
                resume: bool = False, progress: Progress | None = None) -> TrainResult:
    """Train the two-agent scheduler on ``data``: in this process, or in ``workers`` torchrun
    workers (DD-PPO) when more than one.

    Raises:
        ConfigError: What :meth:`TrainingData.load` raises, ``workers`` < 1, an existing run
            without ``resume``, or a resume that does not match.
    """
    if workers < 1:
        raise ConfigError(f"--workers must be >= 1, got {workers}")
    workload, machine = data.load()
    facts = data.provenance(workload, machine)
    if workers > 1:
        from hpcpolicy.marl.distributed import launch

        return launch(cfg, data, run_dir, workers=workers, provenance=facts, resume=resume)
    from hpcpolicy.marl.train import train

    return train(cfg, data.env, workload, machine, run_dir, resume=resume, provenance=facts,
                 progress=progress)
