"""The documentation stays short where a newcomer starts, generated where it describes code,
and runnable where it shows commands (issue 39, item 4).

The site itself is built with ``mkdocs build --strict`` in ``.ci/run``; these checks are the
cheap ones that a stale or broken page would fail first.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

import pytest
from conftest import ROOT
from doc_blocks import command_blocks, run_in

DOCS = ROOT / "docs"
MAX_LINES = 300
"""Longest README.md, RESULTS.md and BENCHMARKS.md: the pages a newcomer reads first."""
RUNNABLE = "<!-- runnable -->"
MAX_PICTURE_BYTES = 300 * 1024


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_reference", DOCS / "gen_reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", ["README.md", "RESULTS.md", "BENCHMARKS.md"])
def test_front_pages_stay_short(name: str) -> None:
    lines = (ROOT / name).read_text(encoding="utf-8").count("\n")
    assert lines <= MAX_LINES, (
        f"{name} has {lines} lines (at most {MAX_LINES}): move the detail to a page under "
        "docs/ (dated runs under docs/lab/) and link it")


def test_generated_pages_are_current() -> None:
    stale = [str(p.relative_to(ROOT)) for p in _generator().stale_pages()]
    assert not stale, f"stale: {', '.join(stale)}; run .venv/bin/python docs/gen_reference.py"


def test_command_reference_names_every_command_and_option() -> None:
    """The generated page is drawn from the app itself: every command and option is there."""
    from typer.testing import CliRunner

    from hpcpolicy.commands import app

    page = (DOCS / "reference" / "cli.md").read_text(encoding="utf-8")
    usage = CliRunner().invoke(app, ["train", "--help"]).output
    for option in re.findall(r"(?<![\w-])(--[a-z][\w-]*)", usage):
        assert option in page, option
    assert "## `hpcpolicy dataset build`" in page


def test_every_page_outside_the_lab_is_in_the_nav() -> None:
    """A guide left out of mkdocs.yml's nav builds, but no reader finds it."""
    nav = set(re.findall(r"^\s+- (?:[^:\n]+: )?(\S+\.md)\s*$",
                         (ROOT / "mkdocs.yml").read_text(encoding="utf-8"), re.M))
    pages = {str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md")}
    missing = sorted(p for p in pages - nav if not p.startswith("lab/"))
    assert not missing, f"add to the nav of mkdocs.yml: {missing}"
    assert nav <= pages, f"the nav names missing pages: {sorted(nav - pages)}"


def test_readme_links_lead_somewhere() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    targets = re.findall(r"\]\((?!https?://)([^)#\s]+)(?:#[^)]*)?\)", readme)
    assert targets
    missing = sorted({t for t in targets if not (ROOT / t).exists()})
    assert not missing, f"README.md links to missing files: {missing}"


def test_pictures_stay_small() -> None:
    """A picture in docs/ travels with every clone: under 300 KB each."""
    pictures = list((DOCS / "img").glob("*.png"))
    assert pictures
    big = [f"{p.name} ({p.stat().st_size // 1024} KB)" for p in pictures
           if p.stat().st_size > MAX_PICTURE_BYTES]
    assert not big, f"shrink or crop: {big}"


def _runnable() -> list[tuple[str, list[list[str]]]]:
    return [(f"{page.relative_to(DOCS)}#{n}", block) for page in sorted(DOCS.rglob("*.md"))
            for n, block in enumerate(command_blocks(page.read_text(encoding="utf-8"),
                                                     RUNNABLE))]


def test_some_examples_are_marked_runnable() -> None:
    assert _runnable(), f"no ```bash block after {RUNNABLE} in docs/"


@pytest.mark.parametrize(("where", "commands"), _runnable(), ids=[w for w, _ in _runnable()])
def test_runnable_examples_run_as_written(where: str, commands: list[list[str]],
                                          tmp_path: Path) -> None:
    run_in(tmp_path, commands)
