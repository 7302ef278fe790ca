"""The scheduling environment: the simulator as a Gymnasium env, one head choice per step.

``hpcpolicy/Scheduling-v0`` is registered with Gymnasium (the ``[rl]`` extra) when
:mod:`~hpcpolicy.env.scheduling` is imported, or when this package is imported after Gymnasium.
The package itself stays light (no Gymnasium, no torch), since :mod:`~hpcpolicy.env.spaces`,
the observation contract, is read by every learned-policy path::

    import gymnasium as gym
    import hpcpolicy.env
    env = gym.make("hpcpolicy/Scheduling-v0", workload=w, cluster=c, config=EnvConfig())

Modules:

* :mod:`~hpcpolicy.env.spaces`: the observation contract (features, K, action mask), no torch;
* :mod:`~hpcpolicy.env.scheduling`: :class:`SchedulingEnv` (spaces, rewards, episode end);
* :mod:`~hpcpolicy.env.registration`: its Gymnasium id and registration;
* :mod:`~hpcpolicy.env.config`: :class:`EnvConfig`;
* :mod:`~hpcpolicy.env.observe`: raw features of a decision, shared with learned policies;
* :mod:`~hpcpolicy.env.rewards`: bounded slowdown, wait, response, utilisation and mixes;
* :mod:`~hpcpolicy.world.split`: the chronological train/test split;
* :mod:`~hpcpolicy.env.driver`: the compiled engine advanced one head choice at a time;
* :mod:`~hpcpolicy.env.factory`: ``make_env`` (the ``module:function`` factory training
  workers call) and the provenance recorded in a policy's manifest.

Example:
    >>> ENV_ID
    'hpcpolicy/Scheduling-v0'
"""

from __future__ import annotations

import sys
from typing import Any

from hpcpolicy.env.config import EnvConfig
from hpcpolicy.env.registration import ENV_ID, register

__all__ = ["ENV_ID", "EnvConfig", "SchedulingEnv"]


def __getattr__(name: str) -> Any:
    if name == "SchedulingEnv":
        from hpcpolicy.env.scheduling import SchedulingEnv

        return SchedulingEnv
    raise AttributeError(f"module 'hpcpolicy.env' has no attribute {name!r}")


if "gymnasium" in sys.modules:  # else scheduling.py registers when it is first imported
    register()
