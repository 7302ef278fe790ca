"""Versioned data contracts as JSON Schema files, shipped with the package."""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

__all__ = ["load"]


def load(name: str) -> dict[str, Any]:
    """The JSON Schema ``schemas/<name>.schema.json`` as a dict.

    Example:
        >>> load("job_table")["title"]
        'hpcpolicy canonical job table (one row)'
    """
    text = resources.files(__name__).joinpath(f"{name}.schema.json").read_text(encoding="utf-8")
    return json.loads(text)  # type: ignore[no-any-return]
