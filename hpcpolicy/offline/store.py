"""Replay datasets on disk: d3rlpy ``MDPDataset`` dumps plus a manifest, and their summary.

Layout of ``data/NAME/``::

    manifest.json      schemas/offline_dataset.schema.json: version, source, K and the
                       observation layout, the environment (reward, backfilling, windows),
                       the job table's path and SHA-256, per split its windows, episode and
                       step counts, returns and action histogram by source, the logged
                       window coverage, and the SHA-256 of each file below
    train.h5           d3rlpy MDPDataset.dump() of the training episodes
    validation.h5      ... of the validation episodes (absent when the split is empty)
    test.h5            ... of the test episodes (the later windows; never used in training)

Each ``*.h5`` loads with ``d3rlpy.dataset.ReplayBuffer.load(f, d3rlpy.dataset.InfiniteBuffer())``
(or :meth:`StoredDataset.mdp`). Observations are flat vectors (:mod:`hpcpolicy.offline.layout`),
actions the slot chosen (0 .. K-1), rewards the environment's, terminals set on the last step
of an episode that scheduled every job of its window. Files are written atomically and the
manifest last, so a directory without a manifest is an interrupted build. The same inputs
and seed give the same bytes (no timestamps).

Example:
    >>> action_buckets([5, 1, 0, 2], k=8)
    {'0': 5, '1': 1, '2-3': 2, '4-7': 0}
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from hpcpolicy.artifact import check_schema
from hpcpolicy.atomic import atomic_path, file_sha256, write_json
from hpcpolicy.docload import read_json
from hpcpolicy.env.spaces import feature_spec
from hpcpolicy.errors import ArtifactError, ConfigError
from hpcpolicy.offline.dataset import SPLIT_NAMES, BuiltDataset
from hpcpolicy.offline.layout import Episode, k_of, obs_dim
from hpcpolicy.offline.logged import LOGGED
from hpcpolicy.offline.quiet import d3rlpy_module
from hpcpolicy.version import __version__

__all__ = ["DATASET_FORMAT", "DATASET_VERSION", "MANIFEST_FILE", "StoredDataset",
           "action_buckets", "load_dataset", "save_dataset"]

DATASET_FORMAT = "hpcpolicy.offline_dataset"
"""The manifest's ``format``."""
DATASET_VERSION = "1.0"
"""Version of the dataset layout this code writes and reads (MAJOR.MINOR)."""
MANIFEST_FILE = "manifest.json"


def action_buckets(counts: list[int], k: int) -> dict[str, int]:
    """Action counts per slot grouped as 0, 1, 2-3, 4-7, ... (powers of two)."""
    out: dict[str, int] = {}
    lo = 0
    while lo < k:
        hi = min(max(2 * lo, 1), k)
        label = str(lo) if hi - lo == 1 else f"{lo}-{hi - 1}"
        out[label] = int(sum(counts[lo:hi]))
        lo = hi
    return out


def _split_facts(episodes: list[Episode], k: int) -> dict[str, Any]:
    """Counts, returns and the action histogram of one split, overall and by source."""
    by_source: dict[str, dict[str, Any]] = {}
    for ep in episodes:
        row = by_source.setdefault(ep.source, {"episodes": 0, "steps": 0, "return_sum": 0.0})
        row["episodes"] += 1
        row["steps"] += len(ep)
        row["return_sum"] += ep.ret
    for row in by_source.values():
        row["mean_return"] = row.pop("return_sum") / row["episodes"]
    actions = np.concatenate([ep.actions for ep in episodes]) if episodes else np.zeros(0, int)
    valid = (np.concatenate([ep.observations[:, -k:].sum(axis=1) for ep in episodes])
             if episodes else np.zeros(0))
    return {"episodes": len(episodes), "steps": int(actions.shape[0]),
            "by_source": by_source,
            "actions": np.bincount(actions, minlength=k).tolist(),
            "mean_valid_slots": float(valid.mean()) if valid.size else None}


def _coverage(built: BuiltDataset) -> dict[str, Any] | None:
    """Share of logged starts whose job was visible, over every split."""
    logged = [ep for eps in built.episodes.values() for ep in eps if ep.source == LOGGED]
    if LOGGED not in built.skipped:
        return None
    inside = sum(ep.facts["inside"] for ep in logged)
    outside = sum(ep.facts["outside"] for ep in logged)
    out: dict[str, Any] = {
        "starts": int(inside + outside), "inside": int(inside), "outside": int(outside),
        "share_inside": inside / (inside + outside) if inside + outside else None,
        "windows_skipped": built.skipped[LOGGED],
        "outside_handling": "kept as dynamics: the job starts between two decisions (as a "
                            "backfilled job does in the environment), no action recorded"}
    if built.config.logged_action == "head":
        out["backfilled"] = int(sum(ep.facts["backfilled"] for ep in logged))
        out["reserved"] = int(sum(ep.facts["reserved"] for ep in logged))
        out["backfilled_handling"] = (
            "a start while the oldest waiting job did not fit is kept as dynamics; the "
            "decision at that moment reserves the oldest job (action 0), once per moment")
    return out


def _dump(episodes: list[Episode], k: int, path: Path) -> None:
    """Write ``episodes`` as one d3rlpy MDPDataset (atomically)."""
    d3 = d3rlpy_module()
    ends = np.cumsum([len(ep) for ep in episodes]) - 1
    terminals = np.zeros(int(ends[-1]) + 1, np.float32)
    timeouts = np.zeros_like(terminals)
    for ep, end in zip(episodes, ends, strict=True):
        (terminals if ep.terminated else timeouts)[end] = 1.0
    data = d3.dataset.MDPDataset(
        np.concatenate([ep.observations for ep in episodes]),
        np.concatenate([ep.actions for ep in episodes]),
        np.concatenate([ep.rewards for ep in episodes]), terminals, timeouts,
        action_space=d3.ActionSpace.DISCRETE, action_size=k)
    with atomic_path(path) as tmp, tmp.open("w+b") as f:
        data.dump(f)


def _validate(manifest: dict[str, Any], where: Path) -> None:
    """Check a manifest against schemas/offline_dataset.schema.json."""
    check_schema(manifest, "offline_dataset", where, "dataset manifest",
                 fix="rebuild it with `hpcpolicy dataset build`")


def save_dataset(built: BuiltDataset, out_dir: str | os.PathLike[str], *,
                 provenance: dict[str, Any], overwrite: bool = False) -> Path:
    """Write the splits and the manifest to ``out_dir``.

    Args:
        built: From :func:`~hpcpolicy.offline.dataset.build_dataset`.
        out_dir: The dataset directory (``data/NAME``).
        provenance: ``training_data`` (the job table's path and SHA-256), ``cluster`` and
            ``workload_options``, recorded as given.
        overwrite: Replace a dataset already there.

    Raises:
        ConfigError: ``out_dir`` holds a dataset and ``overwrite`` is false.
    """
    out = Path(out_dir)
    if (out / MANIFEST_FILE).exists() and not overwrite:
        raise ConfigError(f"{out} already holds a dataset; choose another -o or add --overwrite")
    out.mkdir(parents=True, exist_ok=True)
    (out / MANIFEST_FILE).unlink(missing_ok=True)
    k = built.config.k
    splits: dict[str, Any] = {}
    for name in SPLIT_NAMES:
        episodes = built.episodes[name]
        path = out / f"{name}.h5"
        path.unlink(missing_ok=True)
        if episodes:
            _dump(episodes, k, path)
        splits[name] = {"file": path.name if episodes else None,
                        "sha256": file_sha256(path) if episodes else None,
                        "windows": list(built.windows[name]),
                        **_split_facts(episodes, k)}
    manifest = {
        "format": DATASET_FORMAT, "dataset_version": DATASET_VERSION,
        "package": {"name": "hpcpolicy", "version": __version__},
        "source": built.config.source, "config": built.config.to_dict(),
        "environment": built.config.env_config().to_dict(),
        "observation": {**feature_spec(k), "layout": "flat float32: jobs (K x Fj, row by row) "
                        "| cluster (Fc) | mask (K)", "obs_dim": obs_dim(k)},
        "action_size": k, "sources": list(built.config.sources(LOGGED in built.skipped)),
        "skipped_windows": built.skipped, "logged_coverage": _coverage(built),
        "splits": splits, **provenance,
    }
    _validate(manifest, out / MANIFEST_FILE)
    write_json(out / MANIFEST_FILE, manifest)
    return out


@dataclass(frozen=True)
class StoredDataset:
    """A dataset directory opened by :func:`load_dataset`."""

    path: Path
    manifest: dict[str, Any]

    @property
    def k(self) -> int:
        """Slots of its observations."""
        return int(self.manifest["observation"]["k"])

    def steps(self, split: str) -> int:
        """Decisions in ``split``."""
        return int(self.manifest["splits"][split]["steps"])

    def mdp(self, split: str) -> Any:
        """The d3rlpy ``ReplayBuffer`` of ``split``.

        Raises:
            ConfigError: The split holds no episode.
            ArtifactError: Its file is missing or was changed.
        """
        entry = self.manifest["splits"][split]
        if not entry["file"]:
            raise ConfigError(f"{self.path}: the {split} split is empty (0 episodes); rebuild "
                              "with more windows (a larger job table, --val-frac, or a "
                              "smaller --window-size)")
        file = self.path / entry["file"]
        if not file.is_file():
            raise ArtifactError(f"{file}: missing; the dataset is incomplete, rebuild it")
        if file_sha256(file) != entry["sha256"]:
            raise ArtifactError(f"{file}: SHA-256 differs from {MANIFEST_FILE}; the file was "
                                "changed or only partly copied, rebuild or copy it again")
        d3 = d3rlpy_module()
        with file.open("rb") as f:
            buffer = d3.dataset.ReplayBuffer.load(f, d3.dataset.InfiniteBuffer())
        dim = buffer.dataset_info.observation_signature.shape[0][0]
        if k_of(dim) != self.k:
            raise ArtifactError(f"{file}: observations of {dim} values, the manifest says "
                                f"K = {self.k}; rebuild the dataset")
        return buffer


def load_dataset(path: str | os.PathLike[str]) -> StoredDataset:
    """Open a dataset directory written by :func:`save_dataset`.

    Raises:
        ArtifactError: Not a dataset directory, an interrupted build, another major version,
            or a manifest that breaks the schema.
    """
    path = Path(path)
    manifest_path = path / MANIFEST_FILE
    if not path.is_dir():
        raise ArtifactError(f"{path}: not a dataset directory; build one with `hpcpolicy "
                            "dataset build jobs.parquet -o data/NAME`")
    if not manifest_path.is_file():
        raise ArtifactError(f"{path}: no {MANIFEST_FILE} (not a dataset, or its build was "
                            "interrupted); build it with `hpcpolicy dataset build`")
    manifest = read_json(manifest_path, "dataset manifest", ArtifactError)
    if not isinstance(manifest, dict) or manifest.get("format") != DATASET_FORMAT:
        raise ArtifactError(f"{manifest_path}: not an hpcpolicy offline dataset manifest")
    version = str(manifest.get("dataset_version", ""))
    if version.split(".")[0] != DATASET_VERSION.split(".")[0]:
        raise ArtifactError(f"{manifest_path}: dataset version {version!r}, this hpcpolicy "
                            f"{__version__} reads {DATASET_VERSION.split('.')[0]}.x; rebuild it "
                            "with `hpcpolicy dataset build`")
    _validate(manifest, manifest_path)
    return StoredDataset(path, manifest)
