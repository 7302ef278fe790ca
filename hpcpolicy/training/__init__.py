"""Training as a library call: :func:`train` learns a policy on a job table or a replay dataset,
whichever the algorithm (ppo, ddppo, cql, bcq, bc, dqn, marl), and leaves the whole policy
folder: online, the prior chosen before training (:mod:`.prior`), the snapshot deployed
(:mod:`.snapshots`) and the model card with its guard (:mod:`.card`), each decided on the
validation part (:mod:`.validation`).

Importing this package is light (no torch): each route imports its trainer when it runs.
"""

from __future__ import annotations

from hpcpolicy.training.api import train
from hpcpolicy.training.environment import ENV_FILE
from hpcpolicy.training.hooks import Hooks, Trained, TrainProgress, TrainStart
from hpcpolicy.training.options import MARL, TrainOptions, config_fields

__all__ = ["ENV_FILE", "MARL", "Hooks", "TrainOptions", "TrainProgress", "TrainStart", "Trained",
           "config_fields", "train"]
