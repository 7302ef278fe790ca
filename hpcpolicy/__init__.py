"""hpcpolicy: turn a cluster's real job logs into scheduling answers an administrator can act on.

Ingest Slurm and SWF logs into one canonical job table, replay them in a scheduling simulator,
learn policies (:func:`train`), and compare a candidate with today's policy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hpcpolicy.training import TrainOptions, train

__version__ = "0.1.0"
__all__ = ["TrainOptions", "__version__", "train"]

_LAZY = {"train": "hpcpolicy.training", "TrainOptions": "hpcpolicy.training"}
"""Public names imported on first use, so that ``import hpcpolicy`` stays light."""


def __getattr__(name: str) -> Any:
    """``hpcpolicy.train`` and ``hpcpolicy.TrainOptions``, imported when first used."""
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'hpcpolicy' has no attribute {name!r}")
