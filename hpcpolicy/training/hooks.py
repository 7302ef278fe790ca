"""What a training run reports: its start, its progress (:class:`Hooks`), and where it ended
(:class:`Trained`).

Apart from :mod:`hpcpolicy.training.api` so that the routes, which report through them, do not
import the entry point that calls them.

Example:
    >>> TrainProgress("training cql", "gradient steps", 10, 100).done
    10
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["CARD_PHASE", "Hooks", "TrainProgress", "TrainStart", "Trained"]

CARD_PHASE = "model card: validation and test"
"""The phase of :class:`TrainProgress` reports while the model card replays its windows."""


@dataclass(frozen=True)
class TrainStart:
    """What is about to be trained, once the inputs are checked and loaded."""

    run: Path
    """The run directory."""
    description: str
    """One line: the data, the algorithm, the budget and the run directory."""
    resumable: bool
    """Whether an interrupted run leaves a checkpoint that ``resume`` continues from."""


@dataclass(frozen=True)
class TrainProgress:
    """A progress report from the trainer."""

    phase: str
    """What runs, e.g. ``training cql`` or ``fine-tuning with PPO``."""
    unit: str
    """What ``done`` counts, e.g. ``gradient steps``."""
    done: int
    """Units done so far."""
    total: int
    """Units of the budget."""
    row: Mapping[str, float] | None = None
    """The trainer's metrics row (PPO-style trainers), else None."""


@dataclass(frozen=True)
class Hooks:
    """Callbacks of a training run (each optional)."""

    on_start: Callable[[TrainStart], None] | None = None
    """Called once, before training starts."""
    progress: Callable[[TrainProgress], None] | None = None
    """Called as training advances (not by DD-PPO: its workers log on their own), and as the
    model card replays its windows (phase :data:`CARD_PHASE`, unit: what replays)."""

    def start(self, run: Path, description: str, resumable: bool) -> None:
        """Report the start of the run."""
        if self.on_start is not None:
            self.on_start(TrainStart(run, description, resumable))


@dataclass(frozen=True)
class Trained:
    """Where a training run ended."""

    route: str
    """``online`` (ppo, ddppo), ``offline``, ``marl`` or ``gpu`` (dqn on a job table)."""
    algo: str
    """The algorithm."""
    run_dir: Path
    """The run directory."""
    policy: Path
    """The deployable policy directory (the fine-tuned one, after fine-tuning)."""
    result: Any
    """The trainer's own result: a :class:`~hpcpolicy.ppo.ppo.TrainResult` (online, marl), an
    :class:`~hpcpolicy.offline.train.OfflineResult` or a
    :class:`~hpcpolicy.hetero.train.GpuDqnResult`."""
    evaluate: str
    """The ``hpcpolicy evaluate`` command that compares the policy with the heuristics."""
    finetuned: Any = None
    """After offline training with fine-tuning: the PPO run's TrainResult."""
    card: dict[str, Any] | None = None
    """An online run's model card as written to ``policy/card.json``
    (:func:`hpcpolicy.training.card.model_card`: the snapshot deployed, the guard, the test
    figures); None for the other routes, or a run stopped before its first policy."""
