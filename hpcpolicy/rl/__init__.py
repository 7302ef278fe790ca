"""Reinforcement learning: networks, PPO, DD-PPO, run directories (needs the ``[rl]`` extra).

Modules:

* :mod:`~hpcpolicy.rl.config`: ``PPOConfig`` / ``DDPPOConfig`` and the ``--algo`` registry;
* :mod:`~hpcpolicy.rl.networks`: the per-job scorer MLP and the value network;
* :mod:`~hpcpolicy.rl.ppo`: ``train(cfg, make_env, run_dir)`` and ``compute_gae``;
* :mod:`~hpcpolicy.rl.ddppo`: DD-PPO workers under torchrun and ``launch`` on one machine;
* :mod:`~hpcpolicy.rl.export`: ``export_policy``, and the staging every artifact writer uses;
* :mod:`~hpcpolicy.rl.vector`, :mod:`~hpcpolicy.rl.runs`, :mod:`~hpcpolicy.rl.seeding`.

Importing this package imports nothing heavy; torch is imported by the modules that need it.
"""

from __future__ import annotations

__all__: list[str] = []
