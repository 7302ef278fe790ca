"""Shared fixtures: where the real traces live, and how a test asks for one.

Tests that need ``../shared/data`` skip with a reason when it is absent, unless
``HPCPOLICY_REQUIRE_SHARED_DATA=1`` (as in CI), where a missing file fails the test instead.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"
SHARED_DATA = Path(os.environ.get("HPCPOLICY_SHARED_DATA", ROOT.parent / "shared" / "data"))
SHARED_TOOLS = SHARED_DATA.parent / "tools"


def shared_file(name: str) -> Path:
    """Path of ``../shared/data/<name>``; skip (or fail under CI) when it is absent."""
    path = SHARED_DATA / name
    if not path.exists():
        reason = f"{path} is absent (real traces live in ../shared/data beside the repository)"
        if os.environ.get("HPCPOLICY_REQUIRE_SHARED_DATA") == "1":
            pytest.fail(f"HPCPOLICY_REQUIRE_SHARED_DATA=1 but {reason}")
        pytest.skip(reason)
    return path


@pytest.fixture
def shared() -> object:
    """The :func:`shared_file` lookup, as a fixture."""
    return shared_file
