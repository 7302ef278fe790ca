"""Run directories: config, metrics CSV, checkpoints, and stopping cleanly on Ctrl-C.

Layout of ``runs/<name>/``::

    config.json            the training config (written when the run starts)
    metrics.csv            one row per update; columns in METRICS (+ env/<name>)
    checkpoints/last.pt    model, optimiser, counters, per-worker RNG and environment states
    policy/                the deployable artifact (hpcpolicy.learn.export, hpcpolicy.artifact)
    snapshots/update_N/    the policy after update N, every ``snapshot_every`` updates (if set)
    tune_member.json       only in a member of a population-based tune (hpcpolicy.tune)
    STOP                   a request to stop: any worker that sees it stops the run after the
                           current update, as on Ctrl-C; removed when the run has stopped

Checkpoints are written atomically (temporary file, then rename), so a kill at any moment
leaves the previous checkpoint intact; they contain only tensors and plain data and load with
``torch.load(weights_only=True)``. ``metrics.csv`` is rewritten atomically just before each
checkpoint, so it never runs behind the checkpoint; rows after the checkpoint's update (from a
run killed between the two writes) are dropped on resume.

Example:
    >>> default_run_name("ddppo", 7, now=0.0)
    'train__ddppo__7__19700101T000000Z'
"""

from __future__ import annotations

import csv
import json
import math
import signal
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any

from hpcpolicy.atomic import atomic_path, write_json
from hpcpolicy.config import Config
from hpcpolicy.errors import ArtifactError, ConfigError

__all__ = [
    "CHECKPOINT_FORMAT",
    "METRICS",
    "RESUMABLE_CHANGES",
    "SNAPSHOTS_PER_RUN",
    "TUNE_CHANGES",
    "MetricsLog",
    "RunPaths",
    "StopOnSignal",
    "check_resume_config",
    "default_run_name",
    "default_snapshot_every",
    "load_checkpoint",
    "load_refusal",
    "save_checkpoint",
]

CHECKPOINT_FORMAT = "hpcpolicy.rl.checkpoint/1"
"""Value of the checkpoint's ``format`` key; other values are refused on resume."""

METRICS: dict[str, str] = {
    "update": "Updates done so far.",
    "global_step": "Environment steps so far, summed over environments and workers.",
    "wall_time_s": "Seconds of training so far, summed over resumed sessions.",
    "sps": "Environment steps per second over this update (collection and learning).",
    "charts/episodic_return": "Mean undiscounted return of the episodes that ended in this "
                              "update, all workers (empty if none ended).",
    "charts/episodic_length": "Mean length (decisions) of those episodes.",
    "charts/episodes": "Episodes that ended in this update, all workers.",
    "charts/learning_rate": "Learning rate used in this update.",
    "losses/policy_loss": "Clipped surrogate loss of the last minibatch (rank 0).",
    "losses/value_loss": "Value loss of the last minibatch (rank 0).",
    "losses/entropy": "Mean policy entropy over valid slots, last minibatch (rank 0).",
    "losses/old_approx_kl": "KL estimate -log(ratio), last minibatch (rank 0).",
    "losses/approx_kl": "KL estimate (ratio - 1) - log(ratio), averaged over workers, of the "
                        "last epoch's last minibatch; compared with target_kl.",
    "losses/clipfrac": "Share of samples whose ratio was clipped, over the update (rank 0).",
    "losses/explained_variance": "1 - Var(returns - values) / Var(returns), rank 0's batch.",
    "train/epochs": "Epochs run in this update (fewer than update_epochs after a KL stop).",
    "ddppo/workers_cut": "Workers whose rollout the straggler cut-off shortened.",
    "sync/param_max_diff": "Largest parameter difference between workers (must be 0).",
}
"""Documented metric columns; ``env/<name>`` columns follow for each episode metric."""

RESUMABLE_CHANGES = ("total_steps", "checkpoint_every", "snapshot_every", "torch_threads",
                     "sync_check_every", "timeout_s")
"""Config fields that may differ between a run and its resumption."""

TUNE_CHANGES = ("learning_rate", "ent_coef", "clip_coef")
"""Config fields population-based training changes between rounds; they may also differ on
resume in the directory of a tune member (one holding ``tune_member.json``)."""


@dataclass(frozen=True)
class TrainedRun:
    """Where a training run ended (the d3rlpy-based trainers return one)."""

    run_dir: Path
    """The run directory."""
    steps: int
    """Steps taken (gradient steps offline, environment steps online)."""
    wall_time_s: float
    """Training time of this session (s)."""
    last_metrics: dict[str, float]
    """The trainer's latest metrics."""

    @property
    def policy(self) -> Path:
        """The exported policy directory."""
        return self.run_dir / "policy"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return {**asdict(self), "run_dir": str(self.run_dir)}


class RunPaths:
    """The files of one run directory."""

    def __init__(self, run_dir: str | Path) -> None:
        self.root = Path(run_dir)
        self.config = self.root / "config.json"
        self.metrics = self.root / "metrics.csv"
        self.checkpoint = self.root / "checkpoints" / "last.pt"
        self.policy = self.root / "policy"
        self.tune_member = self.root / "tune_member.json"
        self.stop_request = self.root / "STOP"

    def snapshot(self, update: int) -> Path:
        """The policy directory of the snapshot after ``update`` (zero-padded, so the names
        sort in training order)."""
        return self.root / "snapshots" / f"update_{update:06d}"

    def check_new(self) -> None:
        """Refuse to start a fresh run over an existing one.

        Raises:
            ConfigError: The directory already holds a checkpoint.
        """
        if self.checkpoint.exists():
            raise ConfigError(f"{self.root} already holds a run ({self.checkpoint}); continue it "
                              "with --resume, or choose another output directory")

    def resumable_changes(self) -> tuple[str, ...]:
        """Config fields that may change on resume: :data:`RESUMABLE_CHANGES`, and in a tune
        member's directory :data:`TUNE_CHANGES` too."""
        return RESUMABLE_CHANGES + (TUNE_CHANGES if self.tune_member.is_file() else ())

    def write_config(self, cfg: Config) -> None:
        """Write ``config.json`` atomically."""
        write_json(self.config, cfg.to_dict())


def default_run_name(algo: str, seed: int, command: str = "train",
                     now: float | None = None) -> str:
    """``{command}__{algo}__{seed}__{UTC timestamp}``, as CleanRL names its runs."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(time.time() if now is None else now))
    return f"{command}__{algo}__{seed}__{stamp}"


def save_checkpoint(path: Path, payload: dict[str, Any]) -> None:
    """Write ``payload`` (tensors and plain data) with ``torch.save``, atomically."""
    import torch

    with atomic_path(path) as tmp:
        torch.save({"format": CHECKPOINT_FORMAT, **payload}, tmp)


def load_checkpoint(path: Path) -> dict[str, Any]:
    """Load a checkpoint written by :func:`save_checkpoint`, without unpickling code.

    Raises:
        ConfigError: No checkpoint at ``path``.
        ArtifactError: The file is not a checkpoint of this format.
    """
    import torch

    if not path.exists():
        raise ConfigError(f"no checkpoint at {path}; start without --resume, or point -o at the "
                          "run to continue")
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch's reader and unpickler errors, of many kinds and lines
        raise ArtifactError(f"{path}: cannot be read as a training checkpoint of tensors and "
                            f"plain data ({load_refusal(exc)}); resume a run this version wrote, "
                            "or start a new one in another directory") from exc
    fmt = payload.get("format") if isinstance(payload, dict) else None
    if fmt != CHECKPOINT_FORMAT:
        raise ArtifactError(f"{path}: checkpoint format {fmt!r}, this version reads "
                            f"{CHECKPOINT_FORMAT!r}")
    return payload  # type: ignore[no-any-return]


def load_refusal(exc: BaseException) -> str:
    """The line of a ``torch.load`` error that says what was refused (its other lines advise
    loading the file with code execution on, which a run directory from elsewhere must not
    get), cut short."""
    advice = ("Weights only load failed", "Please file an issue", "Check the documentation")
    said = [line.strip() for line in str(exc).splitlines()
            if line.strip() and not line.strip().startswith(advice)]
    return (said[0] if said else type(exc).__name__)[:200]


def check_resume_config(saved: dict[str, Any], cfg: Config,
                        allowed: tuple[str, ...] = RESUMABLE_CHANGES) -> None:
    """Check that ``cfg`` may continue a run trained with ``saved`` (its ``to_dict()``).

    Args:
        saved: The checkpoint's config.
        cfg: The config to continue with.
        allowed: Fields that may differ (:meth:`RunPaths.resumable_changes` of the run).

    Raises:
        ConfigError: A field other than ``allowed`` differs; the message names them.
    """
    new = cfg.to_dict()
    saved = json.loads(json.dumps(saved))  # older checkpoints hold tuples where to_dict has lists
    changed = sorted(k for k in set(saved) | set(new)
                     if k not in allowed and saved.get(k) != new.get(k))
    if changed:
        details = "; ".join(f"{k}: {saved.get(k)!r} -> {new.get(k)!r}" for k in changed)
        raise ConfigError(f"cannot resume with a different config ({details}); only "
                          f"{', '.join(allowed)} may change")


@dataclass(frozen=True)
class Resumed:
    """What a worker continues from: the checkpoint, its own part, and the counters."""

    checkpoint: dict[str, Any]
    mine: dict[str, Any]
    """This worker's part of ``checkpoint["workers"]`` (generator and environment states)."""
    global_step: int
    update: int
    wall_time_s: float


def resume_from(paths: RunPaths, cfg: Config, world_size: int, rank: int) -> Resumed:
    """The run's last checkpoint, checked against ``cfg`` and the number of workers.

    Raises:
        ConfigError: another config (beyond the resumable fields) or number of workers.
    """
    ckpt = load_checkpoint(paths.checkpoint)
    check_resume_config(ckpt["config"], cfg, paths.resumable_changes())
    if len(ckpt["workers"]) != world_size:
        raise ConfigError(f"{paths.checkpoint} was written by {len(ckpt['workers'])} "
                          f"worker(s); resume with the same number (now {world_size})")
    counters = ckpt["counters"]
    return Resumed(ckpt, ckpt["workers"][rank], counters["global_step"], counters["update"],
                   counters["wall_time_s"])


class MetricsLog:
    """Rows of metrics kept in memory and written to CSV atomically on :meth:`flush`."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.rows: list[dict[str, float]] = []

    def load(self, up_to_update: int) -> None:
        """Read the existing CSV, keeping rows up to ``up_to_update`` (the checkpoint's)."""
        if not self.path.exists():
            return
        with self.path.open(newline="", encoding="utf-8") as f:
            for row in csv.DictReader(f):
                values = {k: float(v) if v != "" else math.nan for k, v in row.items()}
                if values["update"] <= up_to_update:
                    self.rows.append(values)

    def append(self, row: dict[str, float]) -> None:
        """Add one update's row."""
        self.rows.append(row)

    def flush(self) -> None:
        """Rewrite the CSV with every row; columns in :data:`METRICS` order, then the rest."""
        extra = sorted({k for row in self.rows for k in row} - set(METRICS))
        columns = [k for k in METRICS if any(k in row for row in self.rows)] + extra
        with atomic_path(self.path) as tmp, tmp.open("w", newline="", encoding="utf-8") as f:
            writer = csv.writer(f)
            writer.writerow(columns)
            for row in self.rows:
                writer.writerow([_cell(row.get(k, math.nan)) for k in columns])


def _cell(value: float) -> str:
    """CSV text of a metric: empty for NaN, whole numbers without a decimal point."""
    if math.isnan(value):
        return ""
    return str(int(value)) if value.is_integer() else repr(value)


class StopOnSignal:
    """Turn SIGINT/SIGTERM, or a ``stop_file`` that appears, into a request to stop after the
    current update.

    The training loop checks :attr:`requested` between updates, checkpoints and returns. A
    second SIGINT raises ``KeyboardInterrupt`` at once (the last checkpoint stays usable).
    Outside the main thread no handler is installed. When nested (a tune around training
    runs), a request the inner one received is passed to the outer one on exit, so the outer
    loop stops too.
    """

    def __init__(self, stop_file: Path | None = None) -> None:
        self.signalled = False
        self.stop_file = stop_file
        self._previous: dict[int, Any] = {}

    @property
    def requested(self) -> bool:
        """A signal came, or the stop file exists (one ``stat`` per call)."""
        return self.signalled or (self.stop_file is not None and self.stop_file.exists())

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.signalled and signum == signal.SIGINT:
            raise KeyboardInterrupt
        self.signalled = True

    def __enter__(self) -> StopOnSignal:
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
            outer = getattr(handler, "__self__", None)
            if self.requested and isinstance(outer, StopOnSignal):
                outer.signalled = True
        self._previous.clear()


SNAPSHOTS_PER_RUN = 5
"""Snapshots a run exports by default (``snapshot_every`` not set in ``--config``)."""


def default_snapshot_every(total_steps: int, steps_per_update: int) -> int:
    """Updates between snapshots so that a run of ``total_steps`` exports about
    :data:`SNAPSHOTS_PER_RUN` of them.

    Example:
        >>> default_snapshot_every(1_000_000, 2048), default_snapshot_every(128, 64)
        (97, 1)
    """
    updates = -(-total_steps // steps_per_update)
    return max(1, updates // SNAPSHOTS_PER_RUN)
