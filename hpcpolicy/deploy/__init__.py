"""Deployment: a trained artifact back into the simulator, as an ordinary policy.

A policy directory names its kind in its manifest's ``format``;
:func:`~hpcpolicy.deploy.resolve.resolve_policy` dispatches on it through one table, to the
loader of that kind:

* :mod:`~hpcpolicy.deploy.learned`: one job scorer (``hpcpolicy.policy``: PPO, DD-PPO,
  offline RL) choosing the queue head;
* :mod:`~hpcpolicy.deploy.marl`: the two-agent scheduler (``hpcpolicy.marl``), which also
  places GPUs;
* :mod:`~hpcpolicy.deploy.gpu_type`: the GPU-type chooser (``hpcpolicy.gpu-type-policy``);
* :mod:`~hpcpolicy.deploy.resolve`: a heuristic's name or a policy path to a policy, and
  ``simulate`` with policy objects.

Loading reads JSON, checks schema, version and file hashes (:mod:`hpcpolicy.artifact`), and
opens the models with onnxruntime: no pickle, no TorchScript (which runs code it carries), no
training code. A model card is checked against the model it describes
(:mod:`hpcpolicy.deploy.binding`) before its guard or its figures are used. This layer sits
above training (it reads what rl, marl and hetero write) and below evaluate and whatif.
Importing this package imports nothing heavy.
"""

from __future__ import annotations

__all__: list[str] = []
