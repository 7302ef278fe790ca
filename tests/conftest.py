"""Shared fixtures: where the real traces live, and how a test asks for one.

Tests that need ``../shared/data`` skip with a reason when it is absent, unless
``HPCPOLICY_REQUIRE_SHARED_DATA=1`` (as in CI), where a missing file fails the test instead.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
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


def _ci() -> bool:
    return (os.environ.get("CI", "").lower() in ("1", "true")
            or os.environ.get("HPCPOLICY_REQUIRE_SHARED_DATA") == "1")


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """Under pytest-xdist each worker's temporary folders sit one level deeper
    (``<base>/popen-gwN``) than in a serial run. Tests of 80-column output print those paths,
    so the run's base folder is kept shorter than pytest's default (and removed at the end)."""
    if (getattr(config.option, "numprocesses", None) and not config.option.basetemp
            and not hasattr(config, "workerinput")):
        config.option.basetemp = tempfile.mkdtemp(prefix="hp-")
        config.add_cleanup(lambda: shutil.rmtree(config.option.basetemp, ignore_errors=True))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under pytest-xdist (``pytest -n 2 --dist loadgroup``, an option), every test of the one
    real Slurm runs on the same worker: the cluster has fixed ports and one state folder."""
    for item in items:
        if (item.get_closest_marker("slurm") is not None
                or "slurm_cluster" in getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.xdist_group("slurm"))


@pytest.fixture(scope="session")
def slurm_cluster() -> Iterator[object]:
    """The real test Slurm of ``tests/slurm/cluster.py``, up for the session with an empty
    queue (and stopped at its end unless it was already running). Tests using it are marked
    ``slurm``; without root or the packages they skip, except in CI (CI=true or
    HPCPOLICY_REQUIRE_SHARED_DATA=1), where they fail."""
    from slurm.cluster import LocalSlurm, missing_requirements

    why = missing_requirements()
    if why is not None:
        if _ci():
            pytest.fail(f"the Slurm tests must run in CI, but {why}")
        pytest.skip(f"no test Slurm: {why}")
    cluster = LocalSlurm(Path(os.environ.get("HPCPOLICY_SLURM_DIR", "/tmp/hpcpolicy-slurm")))
    was_up = cluster.pid("slurmctld") is not None
    cluster.up()
    cluster.clear_queue()
    yield cluster
    if not was_up:
        cluster.down()


@pytest.fixture(scope="session")
def ray_module() -> object:
    """Ray (the ``cluster`` extra). Without it the test skips, except in CI (CI=true or
    HPCPOLICY_REQUIRE_SHARED_DATA=1), where the README's install includes it and it fails."""
    try:
        import ray
    except ImportError:
        if _ci():
            pytest.fail("the Ray tests must run in CI, but Ray is not installed: "
                        "pip install -e '.[dev,rl,cluster]'")
        pytest.skip("Ray is not installed (pip install 'hpcpolicy[cluster]')")
    return ray
