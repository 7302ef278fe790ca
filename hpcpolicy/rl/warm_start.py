"""Start online training from an exported policy (``hpcpolicy train --init-from POLICY``).

Any policy directory hpcpolicy wrote holds the per-slot scorer as TorchScript; its weights
become the starting point of the new run's policy network, and the value network starts
fresh. Behaviour cloning of a heuristic's decisions (``hpcpolicy dataset build --source
heuristics``, then ``hpcpolicy train --algo bc``) is the usual source: PPO then improves on a
policy that already schedules sensibly instead of on a random one. The weights are read from
TorchScript, never through pickle.

Example:
    >>> import tempfile
    >>> from hpcpolicy.rl.export import export_policy
    >>> from hpcpolicy.rl.config import PPOConfig
    >>> from hpcpolicy.rl.networks import ActorCritic
    >>> from hpcpolicy.env.spaces import CLUSTER_FEATURES, JOB_FEATURES
    >>> d = export_policy(ActorCritic(len(JOB_FEATURES), len(CLUSTER_FEATURES)),
    ...                   tempfile.mkdtemp() + "/p", k=4, metrics={},
    ...                   config={"algo": "bc", "seed": 1, "hidden": [32, 16, 8],
    ...                           "activation": "tanh"})
    >>> sorted(scorer_weights(d, PPOConfig()))[:2]
    ['mlp.0.bias', 'mlp.0.weight']
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from hpcpolicy.errors import ConfigError

if TYPE_CHECKING:
    import torch

    from hpcpolicy.rl.config import PPOConfig

__all__ = ["scorer_weights"]


def scorer_weights(path: str | os.PathLike[str], cfg: PPOConfig) -> dict[str, torch.Tensor]:
    """The :class:`~hpcpolicy.rl.networks.JobScorer` weights of the policy at ``path``.

    Args:
        path: A policy directory (or its manifest or TorchScript file).
        cfg: The config of the run it starts; its network must have the same shape.

    Raises:
        ArtifactError: Not a readable policy, or trained on other features.
        ConfigError: The policy's network differs from ``cfg``'s (the message says which
            ``--config`` fields make them match).
    """
    from hpcpolicy.artifact import load_policy
    from hpcpolicy.env.spaces import CLUSTER_FEATURES, JOB_FEATURES

    policy = load_policy(path, backend="torchscript")
    policy.check_features(tuple(f.name for f in JOB_FEATURES),
                          tuple(f.name for f in CLUSTER_FEATURES))
    net = policy.manifest["network"]
    theirs = (net.get("kind"), list(net.get("hidden", [])), net.get("activation"))
    mine = ("job_scorer_mlp", list(cfg.hidden), cfg.activation)
    if theirs != mine:
        raise ConfigError(
            f"--init-from {path}: its network is a {theirs[0]} with hidden {theirs[1]} and "
            f"activation {theirs[2]!r}; this run's is hidden {mine[1]}, {mine[2]!r}. Give "
            f'--config {{"hidden": {theirs[1]}, "activation": "{theirs[2]}"}} to match it')
    return policy.scorer_state_dict()
