"""Training as a library call: :func:`train` learns a policy on a job table or a replay dataset,
whichever the algorithm (ppo, ddppo, cql, bcq, bc, dqn, marl).

Importing this package is light (no torch): each route imports its trainer when it runs.
"""

from __future__ import annotations

from hpcpolicy.training.api import Hooks, Trained, TrainProgress, TrainStart, train
from hpcpolicy.training.environment import ENV_FILE
from hpcpolicy.training.options import MARL, TrainOptions, config_fields

__all__ = ["ENV_FILE", "MARL", "Hooks", "TrainOptions", "TrainProgress", "TrainStart", "Trained",
           "config_fields", "train"]
