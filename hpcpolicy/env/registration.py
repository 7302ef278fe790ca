"""The Gymnasium id of the scheduling environment, and its registration.

Kept apart from the package's ``__init__`` so that :mod:`hpcpolicy.env.scheduling` registers
itself on import without importing the package that lazily imports it (no import cycle).

Example:
    >>> ENV_ID
    'hpcpolicy/Scheduling-v0'
"""

from __future__ import annotations

__all__ = ["ENV_ID", "register"]

ENV_ID = "hpcpolicy/Scheduling-v0"
"""Gymnasium id of :class:`~hpcpolicy.env.scheduling.SchedulingEnv`."""


def register() -> None:
    """Register :data:`ENV_ID` with Gymnasium (idempotent; needs the ``[rl]`` extra)."""
    import gymnasium as gym

    if ENV_ID not in gym.registry:
        gym.register(id=ENV_ID, entry_point="hpcpolicy.env.scheduling:SchedulingEnv")
