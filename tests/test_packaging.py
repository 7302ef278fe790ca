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


def test_ci_builds_the_documentation_strictly_after_the_tests() -> None:
    """The site is built by CI with --strict (a broken link or nav entry fails), outside the
    checkout, once the README's test command has passed; its tools come with the dev extra."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    test_command = next(c for c in re.findall(r"^python3 -m venv .*$", readme, flags=re.M)
                        if "pytest" in c)
    lines = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    build = [n for n, line in enumerate(lines) if "mkdocs build --strict" in line]
    assert build and build[0] > lines.index(test_command), ".ci/run must build the docs last"
    assert "mktemp -d" in lines[build[0]], "build the site into a temporary folder"
    dev = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]["dev"]
    names = {re.split(r"[<>=\[ ]", spec)[0] for spec in dev}
    assert {"mkdocs", "mkdocs-material"} <= names, dev
