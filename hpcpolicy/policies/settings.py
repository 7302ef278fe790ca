"""What a policy reads from the run it is bound to: the multifactor weights of ``fairshare``.

The run's configuration (:class:`hpcpolicy.sim.types.SimConfig`) satisfies
:class:`RunSettings`; policies depend on this protocol, not on the simulator.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Protocol

from hpcpolicy.config import Config

__all__ = ["FairshareConfig", "RunSettings"]

@dataclass(frozen=True)
class FairshareConfig(Config):
    """Parameters of the Slurm-style multifactor priority (policy ``fairshare``).

    priority = ``weight_fairshare`` x 2^(-U/S) + ``weight_age`` x min(wait / ``max_age_s``, 1)
    + ``weight_size`` x procs / cluster cores, where U is the user's share of the decayed usage
    of all users and S = 1 / (number of users in the workload): equal shares.
    """

    label: ClassVar[str] = "fairshare"

    half_life_s: int = 7 * 86400
    """Half-life of past usage (Slurm ``PriorityDecayHalfLife``, default 7 days)."""
    max_age_s: int = 7 * 86400
    """Waiting time at which the age factor saturates (Slurm ``PriorityMaxAge``, 7 days)."""
    weight_fairshare: float = 10000.0
    """Weight of the fair-share factor (Slurm ``PriorityWeightFairshare``)."""
    weight_age: float = 1000.0
    """Weight of the age factor (Slurm ``PriorityWeightAge``)."""
    weight_size: float = 1000.0
    """Weight of the job-size factor, which favours large jobs (``PriorityWeightJobSize``)."""

    def validate(self) -> None:
        self._at_least(1, "half_life_s", "max_age_s")
        self._at_least(0, "weight_fairshare", "weight_age", "weight_size")


class RunSettings(Protocol):
    """The part of a run's configuration a policy may read when it is bound."""

    @property
    def fairshare(self) -> FairshareConfig:
        """Weights of the ``fairshare`` heuristic."""
        ...
