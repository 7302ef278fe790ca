"""The train / validation / test protocol's defaults, stated once (no heavy import: the
commands' option defaults read them while ``--help`` loads nothing else)."""

from __future__ import annotations

__all__ = ["SPLITS", "TRAIN_FRAC", "VAL_FRAC"]

SPLITS = ("train", "test", "all")
"""Parts of the workload: before the cut, after it, or everything."""

TRAIN_FRAC = 0.7
"""The default share of the jobs, earliest first, in the training part (the rest is the test
part); ``calibrate`` fits on, and ``fidelity`` measures after, the same share."""

VAL_FRAC = 0.1
"""The default share of all the jobs, the last of the training part, kept for validation."""
