"""A tune's directory and its record: ``tune.json`` (the whole state) and ``tune.csv``.

Layout of ``runs/tune-NAME/``::

    tune.json      config, base config, environment, validation windows and baselines,
                   members (seed, current hyperparameters), every round (scores,
                   hyperparameters, exploit events), the best member, status
    tune.csv       one row per round and member: score, rank, hyperparameters, copied member
    members/m0..   ordinary run directories (hpcpolicy.learn.runs), marked as tune members
    policy/        the best member's policy, copied when the tune ends
    ray/s0..       with --backend ray: Ray Tune's experiment of each session (checkpoints)

``tune.json`` is rewritten atomically after every step that changes the state (a member's
round trained, a round scored and decided, its exploits applied), so a tune stopped at any
moment continues from it with ``--resume``; ``tune.csv`` is derived from it and written with it.

Example:
    >>> TunePaths("runs/tune-x").member("m1").as_posix()
    'runs/tune-x/members/m1'
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hpcpolicy.atomic import write_json, write_text
from hpcpolicy.config import read_json_object
from hpcpolicy.errors import ConfigError
from hpcpolicy.tune.pbt import HYPERPARAMETERS

__all__ = ["TUNE_FORMAT", "TunePaths", "TuneRecord"]

TUNE_FORMAT = "hpcpolicy.tune/1"
"""Value of tune.json's ``format`` key."""

CSV_COLUMNS = ("round", "steps", "member", "val_bsld", "rank", *HYPERPARAMETERS, "copied")
"""Columns of tune.csv: ``copied`` names the member whose weights this one took after the
round (empty if none); the hyperparameters are those the member trained with in the round."""


class TunePaths:
    """The files of one tune directory."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.record = self.root / "tune.json"
        self.table = self.root / "tune.csv"
        self.policy = self.root / "policy"

    def member(self, name: str) -> Path:
        """The run directory of member ``name``."""
        return self.root / "members" / name


def _flat(data: Any, prefix: str) -> dict[str, Any]:
    """Nested dicts as ``{"a.b": value}``, to name what differs."""
    if not isinstance(data, dict):
        return {prefix: data}
    out: dict[str, Any] = {}
    for key, value in data.items():
        out.update(_flat(value, f"{prefix}.{key}"))
    return out


@dataclass
class TuneRecord:
    """Everything a tune has decided so far (the content of tune.json)."""

    config: dict[str, Any]
    """The :class:`~hpcpolicy.tune.config.TuneConfig`."""
    base: dict[str, Any]
    """The PPO / DD-PPO config every member derives its own from."""
    env: dict[str, Any]
    """Keyword arguments of the environment factory, as configured (before the cut)."""
    data: dict[str, Any]
    """The job table: ``path`` and ``sha256``."""
    validation: dict[str, Any]
    """The validation part and windows (:meth:`Validation.to_dict`)."""
    baselines: dict[str, float | None]
    """Mean bounded slowdown of each heuristic on the validation windows."""
    members: list[dict[str, Any]]
    """Per member: ``name``, ``seed`` and the ``hyperparameters`` of its next round."""
    rounds: list[dict[str, Any]] = field(default_factory=list)
    """Per finished round: ``round``, ``steps``, ``scores``, ``ranking`` (names, best first),
    ``hyperparameters`` (as trained), ``exploits`` and ``applied`` (whether the exploits'
    weights were copied yet)."""
    trained: list[str] = field(default_factory=list)
    """Members that finished the round in progress."""
    best: dict[str, Any] | None = None
    """The best member of the last round (``member``, ``val_bsld``, ``round``, ``seed``,
    ``hyperparameters``), once the tune is done and its policy copied to ``policy/``."""
    status: str = "running"
    """running, interrupted or done."""
    wall_time_s: float = 0.0
    """Seconds spent, over all sessions."""

    @property
    def names(self) -> list[str]:
        """Member names, in index order."""
        return [m["name"] for m in self.members]

    def save(self, paths: TunePaths) -> None:
        """Write tune.json, then tune.csv, atomically."""
        write_json(paths.record, {"format": TUNE_FORMAT, **dataclasses.asdict(self)})
        write_text(paths.table, self.csv())

    @classmethod
    def load(cls, paths: TunePaths) -> TuneRecord:
        """Read tune.json.

        Raises:
            ConfigError: No tune there, or one of another format.
        """
        if not paths.record.is_file():
            raise ConfigError(f"no tune at {paths.root} ({paths.record} is missing); start "
                              "without --resume, or point -o at the tune to continue")
        data = read_json_object(paths.record)
        if data.pop("format", None) != TUNE_FORMAT:
            raise ConfigError(f"{paths.record}: not a tune record of format {TUNE_FORMAT!r}")
        fields = {f.name for f in dataclasses.fields(cls)}
        if set(data) != fields:
            raise ConfigError(f"{paths.record}: expected the fields {', '.join(sorted(fields))} "
                              "of a tune record, as `hpcpolicy tune` writes it")
        return cls(**data)

    def check_continues(self, new: Mapping[str, Any], root: Path) -> None:
        """Refuse to resume with other options than the tune was started with.

        Args:
            new: The ``config``, ``base``, ``env`` and ``data`` the tune is resumed with.
            root: The tune directory, for the message.

        Raises:
            ConfigError: Names every option that differs.
        """
        keys = ("config", "base", "env", "data")
        now_json = json.loads(json.dumps({k: new[k] for k in keys}))  # tuples as saved: lists
        old = {k: v for key in keys for k, v in _flat(getattr(self, key), key).items()}
        now = {k: v for key in keys for k, v in _flat(now_json[key], key).items()}
        changed = sorted(k for k in set(old) | set(now) if old.get(k) != now.get(k))
        if changed:
            details = "; ".join(f"{k}: {old.get(k)!r} -> {now.get(k)!r}" for k in changed)
            raise ConfigError(f"cannot resume the tune in {root} with different options "
                              f"({details}); give the options it was started with")

    def csv(self) -> str:
        """tune.csv's text."""
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(CSV_COLUMNS)
        for rnd in self.rounds:
            copied = {e["member"]: e["copied"] for e in rnd["exploits"]}
            for name in self.names:
                score = rnd["scores"][name]
                writer.writerow([rnd["round"], rnd["steps"], name,
                                 "" if score is None else repr(score),
                                 rnd["ranking"].index(name) + 1,
                                 *(repr(rnd["hyperparameters"][name][h]) for h in HYPERPARAMETERS),
                                 copied.get(name, "")])
        return out.getvalue()
