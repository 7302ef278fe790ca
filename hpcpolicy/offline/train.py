"""Offline RL on a replay dataset with d3rlpy's discrete algorithms, exported as a policy.

Layout of ``runs/NAME/`` (``hpcpolicy train data/NAME --algo cql -o runs/NAME``)::

    config.json        the OfflineConfig, and the dataset (path, manifest SHA-256)
    metrics.csv        one row per epoch: step, d3rlpy's losses, and on the validation
                       split val_action_match (share of its decisions the policy repeats)
                       and val_td_error (Q-learning algorithms)
    d3rlpy/            d3rlpy's own logs (params.json, one CSV per metric) and its full
                       model checkpoint (model_STEP.d3, for d3rlpy's load_model)
    scorer.pt          the exported scorer's state_dict (torch.load(weights_only=True));
                       --online-finetune starts PPO from it
    policy/            the deployable artifact, as after online training
    result.json        steps, wall time, last metrics, test_action_match

Only the train split is learned from; the validation split is watched; the test split (the
later windows) is only scored once at the end (how often the policy repeats its decisions).

Example:
    >>> result = train_offline(load_dataset("data/hpc2n"), OfflineConfig(algo="bc"),
    ...                        "runs/bc")  # doctest: +SKIP
"""

from __future__ import annotations

import csv
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hpcpolicy.atomic import atomic_path, file_sha256, write_json
from hpcpolicy.errors import ConfigError
from hpcpolicy.learn.runs import TrainedRun
from hpcpolicy.offline.config import OfflineConfig
from hpcpolicy.offline.store import MANIFEST_FILE, StoredDataset

__all__ = ["SCORER_FILE", "OfflineResult", "d3rlpy_config", "train_offline"]

SCORER_FILE = "scorer.pt"
"""In the run directory: the trained scorer's weights."""

Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class OfflineResult(TrainedRun):
    """Where an offline run ended: ``steps`` are gradient steps, ``wall_time_s`` leaves out
    loading and export, ``last_metrics`` is the last row of metrics.csv plus
    ``test_action_match``."""

    algo: str = ""
    """The algorithm."""


def d3rlpy_config(cfg: OfflineConfig) -> Any:
    """The d3rlpy config of ``cfg.algo``, with hpcpolicy's masked per-slot networks."""
    from hpcpolicy.offline.networks import SlotQFunctionFactory, SlotScorerFactory
    from hpcpolicy.offline.quiet import d3rlpy_module

    d3 = d3rlpy_module()
    common: dict[str, Any] = {"batch_size": cfg.batch_size, "learning_rate": cfg.learning_rate}
    scorer = SlotScorerFactory(hidden=list(cfg.hidden), activation=cfg.activation)
    if cfg.algo == "bc":
        # beta = 0: d3rlpy's penalty on the squared logits would fight the -1e9 of empty slots
        return d3.algos.DiscreteBCConfig(**common, encoder_factory=scorer, beta=0.0)
    q_learning = {**common, "gamma": cfg.gamma, "q_func_factory": SlotQFunctionFactory(),
                  "encoder_factory": SlotScorerFactory(
                      hidden=list(cfg.hidden), activation=cfg.activation,
                      value_hidden=list(cfg.dueling_hidden)),
                  "target_update_interval": cfg.target_update_interval, "n_critics": 1,
                  "reward_scaler": d3.preprocessing.MultiplyRewardScaler(cfg.reward_scale)}
    if cfg.algo == "cql":
        return d3.algos.DiscreteCQLConfig(**q_learning, alpha=cfg.alpha)
    if cfg.algo == "bcq":
        # its own imitator network (share_encoder would make the imitator the Q-function)
        return d3.algos.DiscreteBCQConfig(**q_learning, action_flexibility=cfg.bcq_threshold,
                                          beta=0.0, share_encoder=False)
    return d3.algos.DoubleDQNConfig(**q_learning)


def _write_metrics(path: Path, rows: list[dict[str, float]]) -> None:
    columns = list(dict.fromkeys(k for row in rows for k in row))
    with atomic_path(path) as tmp, tmp.open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(columns)
        for row in rows:
            writer.writerow([repr(row[c]) if c in row else "" for c in columns])


def _evaluators(d3: Any, dataset: StoredDataset, cfg: OfflineConfig) -> dict[str, Any]:
    """The d3rlpy evaluators scored on the validation split after each epoch (none without
    one; no TD error for behaviour cloning, which has no Q-function)."""
    if dataset.manifest["splits"]["validation"]["episodes"] == 0:
        return {}
    val = dataset.mdp("validation").episodes
    evaluators: dict[str, Any] = {
        "val_action_match": d3.metrics.DiscreteActionMatchEvaluator(episodes=val)}
    if cfg.algo != "bc":
        evaluators["val_td_error"] = d3.metrics.TDErrorEvaluator(episodes=val)
    return evaluators


def _fit(d3: Any, algo: Any, train_buf: Any, cfg: OfflineConfig, run: Path,
         evaluators: dict[str, Any], progress: Progress | None) -> list[dict[str, float]]:
    """Run d3rlpy's training loop (its logs under ``run``); one metrics row per epoch."""
    per_epoch, steps = cfg.epoch_steps, cfg.epochs * cfg.epoch_steps

    def on_step(_: Any, epoch: int, step: int) -> None:
        if progress is not None and (step % 100 == 0 or step == steps):
            progress(step, steps)

    history = algo.fit(train_buf, n_steps=steps, n_steps_per_epoch=per_epoch,
                       experiment_name="d3rlpy", with_timestamp=False,
                       logger_adapter=d3.logging.FileAdapterFactory(root_dir=str(run)),
                       show_progress=False, save_interval=cfg.epochs, evaluators=evaluators,
                       callback=on_step)
    return [{"epoch": float(epoch), "step": float(epoch * per_epoch),
             **{k: float(v) for k, v in metrics.items() if not k.startswith("time_")}}
            for epoch, metrics in history]


def train_offline(dataset: StoredDataset, cfg: OfflineConfig, run_dir: str | Path, *,
                  progress: Progress | None = None) -> OfflineResult:
    """Train ``cfg.algo`` on the dataset's train split and export the policy.

    Args:
        dataset: From :func:`~hpcpolicy.offline.store.load_dataset`.
        cfg: Algorithm, budget and network.
        run_dir: The run directory (must not hold a run yet).
        progress: Called as ``progress(step, steps)`` every 100 gradient steps.

    Returns:
        Where training ended; the policy is in ``run_dir/policy``.

    Raises:
        ConfigError: The run directory holds a run, or the train split is empty.
        ArtifactError: A split file is missing or was changed.
    """
    import torch

    from hpcpolicy.learn.export import export_policy
    from hpcpolicy.learn.seeding import seed_everything
    from hpcpolicy.offline.networks import exported_scorer, freeze_heads
    from hpcpolicy.offline.quiet import d3rlpy_module

    run = Path(run_dir)
    if (run / "config.json").exists():
        raise ConfigError(f"{run} already holds a run ({run / 'config.json'}); choose another "
                          "output directory")
    d3 = d3rlpy_module()
    train_buf = dataset.mdp("train")
    evaluators = _evaluators(d3, dataset, cfg)  # reads the validation split before any write
    manifest = dataset.path / MANIFEST_FILE
    write_json(run / "config.json", {**cfg.to_dict(), "dataset": {
        "path": str(dataset.path), "manifest_sha256": file_sha256(manifest)}})

    torch.set_num_threads(cfg.torch_threads)
    seed_everything(cfg.seed)
    d3.seed(cfg.seed)
    algo = d3rlpy_config(cfg).create(device=False)
    algo.build_with_dataset(train_buf)
    freeze_heads(algo.impl.modules)
    start = time.perf_counter()
    rows = _fit(d3, algo, train_buf, cfg, run, evaluators, progress)
    wall = time.perf_counter() - start
    _write_metrics(run / "metrics.csv", rows)
    last = dict(rows[-1])
    if dataset.manifest["splits"]["test"]["episodes"] > 0:
        test = dataset.mdp("test")
        last["test_action_match"] = d3.metrics.DiscreteActionMatchEvaluator()(algo, test)
    facts = dataset.manifest
    scorer = exported_scorer(cfg.algo, algo.impl.modules)
    with atomic_path(run / SCORER_FILE) as tmp:
        torch.save(scorer.state_dict(), tmp)
    export_policy(scorer, run / "policy",
                  config={**cfg.to_dict(), "dataset": str(dataset.path)},
                  metrics={k: v for k, v in last.items() if math.isfinite(v)},
                  k=dataset.k, provenance={
                      "reward": facts["environment"]["reward"],
                      "training_data": facts["training_data"],
                      "environment": facts["environment"],
                      "offline_dataset": {"path": str(dataset.path), "source": facts["source"],
                                          "manifest_sha256": file_sha256(manifest),
                                          "train_windows": facts["splits"]["train"]["windows"]},
                  })
    result = OfflineResult(run, cfg.epochs * cfg.epoch_steps, wall, last, algo=cfg.algo)
    write_json(run / "result.json", result.to_dict())
    return result

