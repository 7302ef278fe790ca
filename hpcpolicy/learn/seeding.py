"""Seeding: one :func:`seed_everything` per run, and independent seeds derived from it.

Training uses three sources of randomness, each seeded from the run seed:

* the global torch generator, seeded by :func:`seed_everything`, draws the initial weights
  (identical on every DD-PPO worker);
* a per-worker ``torch.Generator`` (:func:`worker_generator`) samples actions and shuffles
  minibatches;
* a per-worker ``numpy.random.Generator`` in the vector env draws every episode's reset seed.

Example:
    >>> derive_seed(1, 0) == derive_seed(1, 0) != derive_seed(1, 1)
    True
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import torch

__all__ = ["derive_seed", "seed_everything", "worker_generator"]


def derive_seed(seed: int, *keys: int) -> int:
    """A 63-bit seed for the stream named by ``keys`` (e.g. rank, purpose), independent of others.

    Uses numpy's ``SeedSequence`` so that nearby seeds and ranks give unrelated streams.
    """
    state = np.random.SeedSequence([seed, *keys]).generate_state(1, np.uint64)
    return int(state[0] >> np.uint64(1))


def seed_everything(seed: int) -> None:
    """Seed Python's ``random``, numpy's legacy global generator and torch (call once per run).

    hpcpolicy's own code draws only from generators derived with :func:`derive_seed`; the global
    ones are seeded for libraries that use them.
    """
    import torch

    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def worker_generator(seed: int, rank: int, device: str = "cpu") -> torch.Generator:
    """The torch generator a worker samples actions and minibatch orders from."""
    import torch

    return torch.Generator(device=device).manual_seed(derive_seed(seed, rank, 1))
