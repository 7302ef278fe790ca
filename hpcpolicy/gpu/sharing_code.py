"""A sharing allocator, by name or by folder, as the compiled loop takes it: code and weights.

Kept apart from :mod:`hpcpolicy.gpu.registry`, which names the allocators without loading
numba or an exported allocator's model.
"""

from __future__ import annotations

from pathlib import Path

from hpcpolicy.errors import ConfigError
from hpcpolicy.gpu.registry import LEARNED, SHARING_ALLOCATORS, check_sharing

__all__ = ["sharing_code"]


def sharing_code(name: str, weights: tuple[float, ...] = ()) -> tuple[int, tuple[float, ...]]:
    """The compiled loop's code and weights of a sharing allocator.

    Args:
        name: a sharing allocator's name, ``learned`` (with ``weights``), or the folder of an
            exported learned allocator (its weights are loaded and checked).
        weights: the ``learned`` allocator's weights.

    Raises:
        ConfigError: not a sharing allocator.
        ArtifactError: the folder's allocator is damaged or of another version.
    """
    problem = check_sharing(name, weights)
    if problem is not None:
        raise ConfigError(f"allocator {problem}")
    if name == LEARNED:
        return len(SHARING_ALLOCATORS), weights
    if name in SHARING_ALLOCATORS:
        return SHARING_ALLOCATORS.index(name), weights
    from hpcpolicy.gpu.allocator_artifact import load_allocator  # onnx: the rl extra

    return len(SHARING_ALLOCATORS), load_allocator(Path(name))
