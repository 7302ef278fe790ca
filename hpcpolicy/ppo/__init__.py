"""PPO and DD-PPO over the scheduling environment (needs the ``[rl]`` extra).

Modules:

* :mod:`~hpcpolicy.ppo.config`: ``PPOConfig`` / ``DDPPOConfig`` and the ``--algo`` registry;
* :mod:`~hpcpolicy.ppo.ppo`: ``train(cfg, make_env, run_dir)`` and ``compute_gae``;
* :mod:`~hpcpolicy.ppo.ddppo`: DD-PPO workers under torchrun and ``launch`` on one machine;
* :mod:`~hpcpolicy.ppo.vector`: environments stepped side by side;
* :mod:`~hpcpolicy.ppo.warm_start`: a policy's weights read back from its ONNX graph.

Importing this package imports nothing heavy; torch is imported by the modules that need it.
"""

from __future__ import annotations

__all__: list[str] = []
