"""``--online-finetune``: continue an offline-trained policy with PPO in the simulator.

The offline scorer is exactly PPO's policy network (:class:`~hpcpolicy.learn.networks.JobScorer`
with the same hidden widths and activation, which :class:`~hpcpolicy.offline.config.
OfflineConfig` shares with PPO's defaults), so PPO starts from its weights
(``initial_scorer``); the value network, which offline training does not have, starts fresh.
The environment is the dataset's: its job table (checked against the recorded SHA-256), K,
window size, reward and backfilling, with episodes from the same training part. The
fine-tuned run is an ordinary PPO run directory (``RUN/finetune``, with its own ``policy/``).

For Q-learning algorithms the scores are Q-values, used by PPO as logits: their scale sets
the initial policy's temperature (large Q gaps give a nearly greedy start, with little
exploration); behaviour cloning's scores are log-probabilities already.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpcpolicy.atomic import file_sha256
from hpcpolicy.errors import ArtifactError, ConfigError

if TYPE_CHECKING:
    from hpcpolicy.offline.config import OfflineConfig
    from hpcpolicy.offline.store import StoredDataset
    from hpcpolicy.ppo.ppo import Progress, TrainResult

__all__ = ["FINETUNE_DIR", "finetune"]

FINETUNE_DIR = "finetune"
"""The PPO run inside the offline run directory."""


def finetune(run_dir: str | Path, dataset: StoredDataset, cfg: OfflineConfig, *, steps: int,
             ppo_fields: dict[str, Any] | None = None,
             progress: Progress | None = None) -> TrainResult:
    """PPO from the scorer of the offline run in ``run_dir``.

    Args:
        run_dir: A finished offline run (holds ``scorer.pt``).
        dataset: The dataset it learned from (its environment is reused).
        cfg: The offline config (seed, hidden widths, activation).
        steps: Environment steps of PPO.
        ppo_fields: Further :class:`~hpcpolicy.ppo.config.PPOConfig` fields.
        progress: Called with each PPO update's metrics row.

    Raises:
        ConfigError: The job table is missing or changed since the dataset was built.
        ArtifactError: ``scorer.pt`` is not weights of the config's scorer.
    """

    from hpcpolicy.env.config import EnvConfig
    from hpcpolicy.env.factory import env_kwargs, env_world, make_env, provenance
    from hpcpolicy.env.scheduling import EPISODE_METRICS
    from hpcpolicy.offline.train import SCORER_FILE
    from hpcpolicy.ppo.config import PPOConfig
    from hpcpolicy.ppo.ppo import train
    from hpcpolicy.workload import WorkloadOptions
    from hpcpolicy.world.open import WorldSpec

    m = dataset.manifest
    table = Path(m["training_data"]["path"])
    if not table.is_file() or file_sha256(table) != m["training_data"]["sha256"]:
        raise ConfigError(f"--online-finetune replays the dataset's job table {table}, which is "
                          "missing or has changed since the dataset was built; rebuild the "
                          "dataset from the current table")
    env = EnvConfig.from_dict({**m["environment"], "split": "train",
                               "baselines": list(EnvConfig().baselines)})
    options = WorkloadOptions.from_dict(m["workload_options"]) if m["workload_options"] else None
    machine = m.get("machine", {})
    kwargs = env_kwargs(table, env, WorldSpec(workload=options, cluster=machine.get("cluster"),
                                              procs=machine.get("procs")))
    world = env_world(kwargs)
    workload, cluster = world.workload, world.cluster
    ppo = PPOConfig.from_dict({"seed": cfg.seed, "total_steps": steps, "hidden": cfg.hidden,
                               "activation": cfg.activation,
                               "episode_metric_names": tuple(EPISODE_METRICS),
                               **(ppo_fields or {})})
    scorer = _scorer(Path(run_dir) / SCORER_FILE, cfg)
    facts = {**provenance(table, env, workload, cluster), "initialised_from": str(run_dir)}
    return train(ppo, functools.partial(make_env, **kwargs), Path(run_dir) / FINETUNE_DIR,
                 provenance=facts, progress=progress, initial_scorer=scorer)


def _scorer(path: Path, cfg: OfflineConfig) -> dict[str, Any]:
    """The offline scorer's weights at ``path``: tensors only, of ``cfg``'s network.

    Raises:
        ArtifactError: torch refuses the file as weights only, or its weights are not those of
            a scorer of ``cfg``'s hidden widths.
    """
    import torch

    from hpcpolicy.learn.runs import load_refusal
    from hpcpolicy.ppo.warm_start import shapes_differ

    try:
        scorer = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch's reader and unpickler errors, of many kinds and lines
        raise ArtifactError(f"{path}: cannot be read as the offline scorer's weights "
                            f"({load_refusal(exc)}); train the offline run again") from exc
    differ = shapes_differ(scorer, cfg.hidden, cfg.activation) if isinstance(scorer, dict) \
        else f"are a {type(scorer).__name__}"
    if differ:
        raise ArtifactError(f"{path}: its weights {differ}, not those of the hidden "
                            f"{list(cfg.hidden)} scorer of this config; train the offline run "
                            "again with the same --config")
    weights: dict[str, Any] = scorer
    return weights
