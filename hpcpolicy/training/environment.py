"""A run's ``env.json``: the environment it trains in, recorded at the start and checked on
resume, so that a resumed run never continues in a different environment."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hpcpolicy.atomic import write_json
from hpcpolicy.config import read_json_object
from hpcpolicy.errors import ConfigError

__all__ = ["ENV_FILE", "record_environment"]

ENV_FILE = "env.json"
"""In the run directory: the environment factory and its arguments (checked on resume)."""


def _flat(kwargs: dict[str, Any]) -> dict[str, Any]:
    """``{"env": {"reward": ...}}`` as ``{"env.reward": ...}``, for naming what changed."""
    flat: dict[str, Any] = {}
    for key, value in kwargs.items():
        if isinstance(value, dict):
            flat.update({f"{key}.{k}": v for k, v in value.items()})
        else:
            flat[key] = value
    return flat


def record_environment(run: Path, factory: str, kwargs: dict[str, Any], resume: bool) -> None:
    """Record the environment of a fresh run; on resume, refuse a different one.

    Args:
        run: The run directory (exists).
        factory: The environment factory's name.
        kwargs: Its JSON-ready keyword arguments.
        resume: Whether the run continues; then ``env.json`` must hold the same environment.

    Raises:
        ConfigError: On resume, no ``env.json``, one that is not as written here, or one with
            another factory or arguments (the message names each difference).
    """
    path = run / ENV_FILE
    spec = {"factory": factory, "kwargs": kwargs}
    if not resume:
        write_json(path, spec)
        return
    if not path.is_file():
        raise ConfigError(f"{path} not found: {run} was not written by `hpcpolicy train`")
    saved = read_json_object(path)
    if not (isinstance(saved.get("factory"), str)
            and isinstance(saved.get("kwargs"), dict)):
        raise ConfigError(f"{path}: expected an object with a `factory` name and its `kwargs` "
                          "object, as `hpcpolicy train` writes it")
    old, new = _flat(saved["kwargs"]), _flat(kwargs)
    changed = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
    if saved["factory"] != factory or changed:
        details = "; ".join(f"{k}: {old.get(k)!r} -> {new.get(k)!r}" for k in changed)
        raise ConfigError(f"cannot resume {run} with a different environment ({details}); "
                          "give the options of the original run")
