"""The docstring examples of the library, the commands and the schemas run as tests.

One test per module whose source holds a ``>>>`` line. Modules are found by reading the
source (collection imports nothing); each test imports its module, runs every example that
:class:`doctest.DocTestFinder` finds in it, and checks that the finder saw every example the
source holds, so an example that no test would ever run (one in a compiled kernel's docstring,
say) fails here instead of going stale. Examples marked ``# doctest: +SKIP`` (they name a
user's files or train for minutes) are left out by doctest itself.
"""

from __future__ import annotations

import doctest
import importlib
import re
from pathlib import Path

import pytest
from conftest import ROOT

# commands/ and schemas/ install as hpcpolicy.commands and hpcpolicy.schemas (pyproject.toml).
SOURCES = {"hpcpolicy": "hpcpolicy", "commands": "hpcpolicy.commands",
           "schemas": "hpcpolicy.schemas"}
# An example's first line; doctest skips a ">>>" line that holds only a comment.
EXAMPLE = re.compile(r"^\s*>>>(?!\s*#)", re.MULTILINE)
# The extras a module may need; without them (a plain `pip install -e .`) its examples skip.
EXTRAS = {"torch", "gymnasium", "onnx", "onnxruntime", "jsonschema", "d3rlpy"}


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = [SOURCES[rel.parts[0]], *rel.parts[1:]]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules_with_examples() -> dict[str, int]:
    """Module name -> how many examples its source holds, for every module that has one."""
    found: dict[str, int] = {}
    for top in SOURCES:
        for path in sorted((ROOT / top).rglob("*.py")):
            count = len(EXAMPLE.findall(path.read_text(encoding="utf-8")))
            if count:
                found[_module_name(path)] = count
    return found


MODULES = _modules_with_examples()


def test_the_examples_are_found() -> None:
    # A guard on the discovery itself: the library documents its entry points by example.
    assert len(MODULES) > 100
    assert "hpcpolicy.sim.metrics" in MODULES and "hpcpolicy.commands.whatif" in MODULES


@pytest.mark.parametrize("name", sorted(MODULES))
def test_docstring_examples(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    try:
        module = importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name not in EXTRAS:
            raise
        pytest.skip(f"{name} needs {exc.name} (pip install -e '.[rl]')")
    monkeypatch.chdir(tmp_path)  # an example that writes a relative path writes here
    tests = [t for t in doctest.DocTestFinder().find(module, name) if t.examples]
    seen = sum(len(t.examples) for t in tests)
    assert seen == MODULES[name], (
        f"{name}: the source holds {MODULES[name]} examples but doctest finds {seen}; an "
        "example outside a module/class/function docstring (or in a compiled kernel's) never runs"
    )
    report: list[str] = []
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    for test in tests:
        runner.run(test, out=report.append)
    if runner.failures:
        pytest.fail("".join(report), pytrace=False)
