"""The two-agent scheduler's deployable artifact: one directory, both agents' scorers.

Layout of ``runs/<name>/policy/``::

    manifest.json        format "hpcpolicy.marl", algo "marl": the agents, the decision
                         rules' parameters (k, visible), reward, training data, config,
                         metrics
    selector/            a policy directory of hpcpolicy.artifact: manifest.json (its
                         features), policy.onnx, policy.torchscript.pt
    allocator/           the same for the allocator: its "jobs" input holds the candidate
                         placements (CANDIDATE_FEATURES), its "cluster" input the job and
                         cluster context (CONTEXT_FEATURES)

Each agent's directory is an ordinary policy artifact, exported and loaded by
:mod:`hpcpolicy.artifact` (schema, version and SHA-256 checks, ONNX or TorchScript, no
pickle, no training code); this module adds the top-level manifest that binds the two.

Example:
    >>> import tempfile
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

import datetime as dt
import json
import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpcpolicy.artifact import (
    MANIFEST_VERSION,
    LoadedPolicy,
    export_policy,
    load_policy,
    manifest_format,
    read_manifest,
)
from hpcpolicy.atomic import build_dir, replace_dir, write_json
from hpcpolicy.env.spaces import CLUSTER_FEATURES, JOB_FEATURES
from hpcpolicy.errors import ArtifactError
from hpcpolicy.marl.features import (
    CANDIDATE_FEATURES,
    CONTEXT_FEATURES,
    VISIBLE,
    allocator_spec,
)

if TYPE_CHECKING:
    from hpcpolicy.marl.config import MarlConfig
    from hpcpolicy.marl.networks import TwoAgents

__all__ = ["MARL_FORMAT", "MarlArtifact", "export_marl", "is_marl_artifact", "load_marl"]

MARL_FORMAT = "hpcpolicy.marl"
"""``format`` of the top-level manifest."""

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
    out_dir = Path(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    build = build_dir(out_dir)
    build.chmod(0o755)
    facts = {**(provenance or {}), "reward": cfg.reward}
    try:
        for name, net, hidden, spec in (
                ("selector", nets.selector, cfg.hidden, None),
                ("allocator", nets.allocator, cfg.allocator_hidden, allocator_spec(candidates))):
            agent_config = {"algo": cfg.algo, "seed": cfg.seed, "agent": name,
                            "hidden": list(hidden), "activation": cfg.activation}
            export_policy(net, build / name, config=agent_config, metrics=metrics,
                          k=candidates if spec else k, provenance=facts, observation=spec)
        selector = json.loads((build / "selector" / "manifest.json").read_text(encoding="utf-8"))
        write_json(build / "manifest.json", {
            "manifest_version": MANIFEST_VERSION,
            "format": MARL_FORMAT,
            "created_utc": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "package": selector["package"],
            "algo": cfg.algo,
            "agents": {"selector": {"path": "selector", "k": k, "visible": visible},
                       "allocator": {"path": "allocator", "max_candidates": candidates}},
            "decision": _RULES.format(visible=VISIBLE[visible]),
            "reward": cfg.reward,
            "training_data": selector["training_data"],
            "config": cfg.to_dict(),
            "metrics": selector["metrics"],
            "provenance": selector["provenance"],
        })
        replace_dir(build, out_dir)
    except BaseException:
        shutil.rmtree(build, ignore_errors=True)
        raise
    return out_dir


@dataclass(frozen=True)
class MarlArtifact:
    """A two-agent artifact opened by :func:`load_marl`."""

    path: Path
    """The artifact directory."""
    manifest: dict[str, Any]
    """The top-level manifest."""
    selector: LoadedPolicy
    """The selector's scorer."""
    allocator: LoadedPolicy
    """The allocator's scorer."""

    @property
    def backend(self) -> str:
        """``onnx`` or ``torchscript``."""
        return self.selector.backend

    @property
    def k(self) -> int:
        """Job slots the selector sees."""
        return int(self.manifest["agents"]["selector"]["k"])

    @property
    def visible(self) -> str:
        """Which waiting jobs the selector sees (artifacts written before the choice existed
        showed the oldest)."""
        return str(self.manifest["agents"]["selector"].get("visible", "oldest"))


def is_marl_artifact(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` (a directory or its manifest.json) holds a two-agent artifact."""
    return manifest_format(path) == MARL_FORMAT


def load_marl(path: str | os.PathLike[str], backend: str = "auto") -> MarlArtifact:
    """Open both agents' scorers, without training code and without pickle.

    Args:
        path: The artifact directory or its ``manifest.json``.
        backend: ``auto``, ``onnx`` or ``torchscript`` (:func:`hpcpolicy.artifact.load_policy`).

    Raises:
        ArtifactError: Not a two-agent artifact, another major manifest version, or what
            :func:`~hpcpolicy.artifact.load_policy` raises for either agent.
    """
    directory, manifest = read_manifest(path, MARL_FORMAT,
                                        "write one with `hpcpolicy train --algo marl`")
    file = directory / "manifest.json"
    agents = manifest.get("agents", {})
    if set(agents) != {"selector", "allocator"}:
        raise ArtifactError(f"{file}: `agents` must name selector and allocator, got "
                            f"{sorted(agents)}")
    visible = agents["selector"].get("visible", "oldest")
    if visible not in VISIBLE:
        raise ArtifactError(f"{file}: agents.selector.visible {visible!r} is not one of "
                            f"{', '.join(VISIBLE)}; the artifact is from a newer hpcpolicy")
    selector = load_policy(directory / agents["selector"]["path"], backend)
    selector.check_features(tuple(f.name for f in JOB_FEATURES),
                            tuple(f.name for f in CLUSTER_FEATURES))
    allocator = load_policy(directory / agents["allocator"]["path"], backend)
    allocator.check_features(tuple(f.name for f in CANDIDATE_FEATURES),
                             tuple(f.name for f in CONTEXT_FEATURES))
    return MarlArtifact(directory, manifest, selector, allocator)
