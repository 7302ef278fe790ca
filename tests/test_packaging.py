"""The install and CI stay true to the README."""

from __future__ import annotations

import re
import tomllib

from conftest import ROOT


def test_every_subpackage_is_installed() -> None:
    """A package missing from pyproject's list works editable but vanishes from a wheel."""
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
                 ["packages"])
    found = {"hpcpolicy"} | {
        "hpcpolicy." + ".".join(p.parent.relative_to(ROOT / "hpcpolicy").parts)
        for p in (ROOT / "hpcpolicy").rglob("__init__.py") if p.parent != ROOT / "hpcpolicy"
    }
    assert found <= listed, f"add to pyproject [tool.setuptools] packages: {found - listed}"


def test_ci_runs_the_readme_test_command() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    commands = re.findall(r"^python3 -m venv .*$", readme, flags=re.MULTILINE)
    assert len(commands) == 2, "README must give exactly two set-up commands"
    test_command = next(c for c in commands if "pytest" in c)
    assert test_command in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
