"""The two-agent scheduler's deployable artifact: one directory, both agents' scorers.

Layout of ``runs/<name>/policy/``::

    manifest.json        format "hpcpolicy.marl", algo "marl": the agents, the decision
                         rules' parameters (k, visible), reward, training data, config,
                         metrics (schemas/marl_manifest.schema.json)
    selector/            a policy directory of hpcpolicy.artifact: manifest.json (its
                         features), policy.onnx, policy.torchscript.pt
    allocator/           the same for the allocator: its "jobs" input holds the candidate
                         placements (CANDIDATE_FEATURES), its "cluster" input the job and
                         cluster context (CONTEXT_FEATURES)

Each agent's directory is an ordinary policy artifact, written by
:func:`hpcpolicy.learn.export.export_policy`; this module adds the top-level manifest that binds
the two. :mod:`hpcpolicy.deploy.marl` reads it back (schema, version and SHA-256 checks,
ONNX with onnxruntime, no pickle, no TorchScript, no training code).

Example:
    >>> import tempfile
    >>> from hpcpolicy.deploy.marl import load_marl
    >>> from hpcpolicy.marl.config import MarlConfig
    >>> from hpcpolicy.marl.networks import TwoAgents
    >>> cfg = MarlConfig()
    >>> d = export_marl(TwoAgents(cfg), tempfile.mkdtemp() + "/policy", cfg=cfg, k=8,
    ...                 candidates=9, metrics={})
    >>> art = load_marl(d)
    >>> art.manifest["algo"], art.visible, sorted(p.name for p in d.iterdir())
    ('marl', 'oldest', ['allocator', 'manifest.json', 'selector'])
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpcpolicy.artifact import MANIFEST_FILE, MARL_FORMAT
from hpcpolicy.learn.export import export_policy, stage_artifact
from hpcpolicy.marl.features import VISIBLE, allocator_spec

if TYPE_CHECKING:
    from hpcpolicy.marl.config import MarlConfig
    from hpcpolicy.marl.networks import TwoAgents

__all__ = ["export_marl"]

_RULES = ("the selector sees k waiting jobs (agents.selector.visible: {visible}) and chooses "
          "one, which becomes the queue head, the others following in submit order. Under "
          "the oldest and fitting rules it chooses among those that fit now, so the head "
          "starts at once, and when none of them fits the oldest is the head (FCFS); under "
          "shortest and extremes it chooses any of them, and a head that does not fit waits "
          "for room. The allocator chooses among the job's candidate placements: every pool "
          "whose free totals hold it x the first-available, best-fit and topology-aware "
          "placements there, duplicates dropped (for a job backfilling starts: in the pool "
          "backfilling planned with). A decision with one option is taken without asking. "
          "Higher scores are better.")


def export_marl(nets: TwoAgents, out_dir: str | os.PathLike[str], *, cfg: MarlConfig, k: int,
                candidates: int, metrics: Mapping[str, float], visible: str = "oldest",
                provenance: Mapping[str, Any] | None = None) -> Path:
    """Write the artifact directory (built beside ``out_dir``, then renamed into place).

    Args:
        nets: The trained agents.
        out_dir: The policy directory, usually ``runs/<name>/policy``.
        cfg: The training config.
        k: Job slots the selector saw.
        candidates: The most candidate placements the allocator saw (pools x 3).
        metrics: Final training metrics.
        visible: Which waiting jobs the selector's slots showed
            (:data:`~hpcpolicy.marl.features.VISIBLE`).
        provenance: ``training_data`` (``{"path", "sha256"}``) and further JSON-ready keys.

    Returns:
        ``out_dir`` as a Path.
    """
    facts = {**(provenance or {}), "reward": cfg.reward}

    def body(build: Path) -> dict[str, Any]:
        for name, net, hidden, spec in (
                ("selector", nets.selector, cfg.hidden, None),
                ("allocator", nets.allocator, cfg.allocator_hidden, allocator_spec(candidates))):
            agent_config = {"algo": cfg.algo, "seed": cfg.seed, "agent": name,
                            "hidden": list(hidden), "activation": cfg.activation}
            export_policy(net, build / name, config=agent_config, metrics=metrics,
                          k=candidates if spec else k, provenance=facts, observation=spec)
        selector = json.loads((build / "selector" / MANIFEST_FILE).read_text(encoding="utf-8"))
        return {
            "algo": cfg.algo,
            "agents": {"selector": {"path": "selector", "k": k, "visible": visible},
                       "allocator": {"path": "allocator", "max_candidates": candidates}},
            "decision": _RULES.format(visible=VISIBLE[visible]),
            "reward": cfg.reward,
            "training_data": selector["training_data"],
            "config": cfg.to_dict(),
            "metrics": selector["metrics"],
            "provenance": selector["provenance"],
        }

    return stage_artifact(out_dir, MARL_FORMAT, body)
