"""The deployable GPU-type policy: export after training (read back by
:mod:`hpcpolicy.deploy.gpu_type`, without d3rlpy or training code).

A policy directory (``runs/NAME/policy/``) holds:

* ``policy.onnx`` and ``policy.torchscript.pt``: ``q = f(obs)``, ``obs [B, D]`` float32 as
  built by :mod:`hpcpolicy.hetero.observe`, ``q [B, P]`` float32, one value per GPU type in
  the manifest's ``pools`` order, higher is better, ``-inf`` where the type cannot hold the
  job;
* ``manifest.json``: ``format`` ``hpcpolicy.gpu-type-policy``, ``algo`` ``dqn-gpu``, the pools
  (name, speed) the policy was trained for, the observation's feature names, the queue policy
  (FCFS), the reward (ADLRO: lambda, scale), the training data's hash, config, metrics,
  package version and the SHA-256 of both model files
  (``schemas/gpu_type_policy_manifest.schema.json``).

This is another contract than the job scorer's (``scores = f(jobs, cluster, mask)``), hence
its own ``format``; it is written by the same staging code
(:func:`hpcpolicy.learn.export.stage_artifact`) and read with the same checks.

Example:
    >>> import tempfile
    >>> import numpy as np
    >>> from hpcpolicy.deploy.gpu_type import load_gpu_policy
    >>> net = PoolQ(2, (8,), "relu")
    >>> d = export_gpu_policy(net, tempfile.mkdtemp() + "/policy", pools=(("a", 1.0),
    ...     ("b", 2.0)), config={"seed": 1}, reward={}, metrics={})
    >>> load_gpu_policy(d).q(np.zeros(16, np.float32)).tolist()   # no type can hold the job
    [-inf, -inf]
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hpcpolicy.artifact import GPU_TYPE_FORMAT
from hpcpolicy.hetero.config import ALGO
from hpcpolicy.hetero.observe import feature_names
from hpcpolicy.hetero.qnet import DeployedQ, PoolQ
from hpcpolicy.learn.export import Network, finite_metrics, stage_artifact

__all__ = ["export_gpu_policy"]


def export_gpu_policy(net: PoolQ, out_dir: str | Path, *, pools: tuple[tuple[str, float], ...],
                      config: Mapping[str, Any], reward: Mapping[str, Any],
                      metrics: Mapping[str, float],
                      training_data: Mapping[str, Any] | None = None) -> Path:
    """Write ``policy.onnx``, ``policy.torchscript.pt`` and ``manifest.json`` to ``out_dir``
    (built beside it and renamed into place, replacing an older one).

    Args:
        net: The trained Q-network.
        out_dir: The policy directory, usually ``runs/NAME/policy``.
        pools: (name, speed) of each GPU type, in action order.
        config: The run's config (``to_dict()``).
        reward: The reward's definition and constants.
        metrics: Final training metrics (NaN/inf written as null).
        training_data: ``{"path", "sha256"}`` of the job table.

    Returns:
        ``out_dir`` as a Path.
    """
    import torch

    model = DeployedQ(copy.deepcopy(net).cpu()).eval()
    network = Network(model, (torch.zeros(1, net.dim),), inputs=("obs",), outputs=("q",),
                      dynamic_axes={"obs": {0: "batch"}, "q": {0: "batch"}})
    names = tuple(name for name, _ in pools)
    return stage_artifact(out_dir, GPU_TYPE_FORMAT, lambda _: {
        "algo": ALGO,
        "pools": [{"name": name, "speed": speed} for name, speed in pools],
        "queue_policy": "fcfs",
        "observation": {"dim": net.dim, "features": list(feature_names(names)),
                        "defined_in": "hpcpolicy.hetero.observe"},
        "outputs": {"q": "float32 [B, P]; one value per pool, higher is better; -inf "
                         "where the pool cannot hold the job"},
        "network": {"kind": "pool_q_mlp", "parameters": sum(p.numel() for p in net.parameters())},
        "reward": dict(reward),
        "training_data": dict(training_data) if training_data else None,
        "config": dict(config),
        "metrics": finite_metrics(metrics),
    }, network)
