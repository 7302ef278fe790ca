"""House rules read from the source: no private names borrowed across modules, thin commands,
few long library functions.

Each check parses the code with :mod:`ast` (nothing is imported) and names what breaks the
rule, so the message says where to look.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import ROOT

# Where each source folder installs (pyproject.toml maps commands/ and schemas/ under hpcpolicy).
PACKAGES = {"hpcpolicy": "hpcpolicy", "commands": "hpcpolicy.commands",
            "schemas": "hpcpolicy.schemas"}

# Private names a module may still take from another, as "file: module.name". Each entry
# must still occur (a stale one fails), so the list only shrinks; it is empty now.
BORROWED_PRIVATE: set[str] = set()

COMMAND_MODULE_LINES = 250
COMMAND_BODY_LINES = 60
LONG_FUNCTION_LINES = 80
LONG_FUNCTIONS_ALLOWED = 5

def _modules() -> dict[str, tuple[Path, bool]]:
    """Dotted module name -> (source file, whether it is a package's __init__)."""
    found: dict[str, tuple[Path, bool]] = {}
    for folder, package in PACKAGES.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = [package, *path.relative_to(ROOT / folder).with_suffix("").parts]
            is_package = parts[-1] == "__init__"
            if is_package:
                parts.pop()
            found[".".join(parts)] = (path, is_package)
    return found


MODULES = _modules()


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _source_module(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The absolute name of the module ``node`` imports from (relative imports resolved)."""
    if node.level == 0:
        return node.module or ""
    base = module.split(".")[: None if is_package else -1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


def _borrowed_private_names(module: str, path: Path, is_package: bool) -> Iterator[str]:
    """Each private name of another hpcpolicy module that ``module`` imports or reads."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    aliases: dict[str, str] = {}  # local name -> the hpcpolicy module it is bound to
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            source = _source_module(module, is_package, node)
            if source.split(".")[0] != "hpcpolicy":
                continue
            for alias in node.names:
                if f"{source}.{alias.name}" in MODULES:  # a module, not a name
                    aliases[alias.asname or alias.name] = f"{source}.{alias.name}"
                elif _private(alias.name) and source != module:
                    yield f"{source}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in MODULES:
                    aliases[alias.asname or alias.name] = alias.name
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Attribute) and _private(node.attr)):
            continue
        dotted = ast.unparse(node.value)
        owner = aliases.get(dotted, dotted)
        if owner in MODULES and owner != module:
            yield f"{owner}.{node.attr}"


def test_no_module_borrows_another_modules_private_names() -> None:
    found = {
        f"{path.relative_to(ROOT)}: {name}"
        for module, (path, is_package) in MODULES.items()
        for name in _borrowed_private_names(module, path, is_package)
    }
    new = sorted(found - BORROWED_PRIVATE)
    assert not new, ("private names used outside their module; make them public where they "
                     f"are needed, or move the code: {new}")
    stale = sorted(BORROWED_PRIVATE - found)
    assert not stale, f"no longer borrowed; remove from BORROWED_PRIVATE: {stale}"


def test_the_private_name_check_sees_both_forms(tmp_path: Path) -> None:
    path = tmp_path / "probe.py"
    path.write_text("from hpcpolicy.sim.fast import _x\nfrom hpcpolicy.sim import fast\n"
                    "import hpcpolicy.env.rewards as rw\nfast._y\nrw._z\nfast.ok\n")
    assert sorted(_borrowed_private_names("hpcpolicy.probe", path, False)) == [
        "hpcpolicy.env.rewards._z", "hpcpolicy.sim.fast._x", "hpcpolicy.sim.fast._y"]


def _functions(tree: ast.AST) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef]:
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield node


def _compiled(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """A numba kernel (``@njit``, ``@nb.njit(...)``, ``@jit``): its length is the price of
    speed, as one compiled loop, and is excepted from the long-function count."""
    for deco in fn.decorator_list:
        target = deco.func if isinstance(deco, ast.Call) else deco
        if ast.unparse(target).split(".")[-1] in {"njit", "jit"}:
            return True
    return False


def _code_lines(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """Lines of a function's body after its docstring (a command's docstring is its --help)."""
    body = fn.body
    if isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str) and len(body) > 1:
        body = body[1:]
    return (fn.end_lineno or fn.lineno) - body[0].lineno + 1


@pytest.mark.parametrize("path", sorted((ROOT / "commands").glob("*.py")), ids=lambda p: p.name)
def test_commands_stay_thin(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    lines = len(text.splitlines())
    assert lines <= COMMAND_MODULE_LINES, (
        f"{path.name} has {lines} lines (at most {COMMAND_MODULE_LINES}): move logic into "
        "the library")
    long = {fn.name: _code_lines(fn) for fn in _functions(ast.parse(text))
            if _code_lines(fn) > COMMAND_BODY_LINES}
    assert not long, (f"{path.name}: function bodies over {COMMAND_BODY_LINES} lines: {long}; "
                      "a command parses, calls one library function and prints")


def test_few_long_library_functions() -> None:
    long = sorted(
        f"{path.relative_to(ROOT)}:{fn.name} ({(fn.end_lineno or fn.lineno) - fn.lineno + 1})"
        for path in sorted((ROOT / "hpcpolicy").rglob("*.py"))
        for fn in _functions(ast.parse(path.read_text(encoding="utf-8")))
        if not _compiled(fn) and (fn.end_lineno or fn.lineno) - fn.lineno + 1 > LONG_FUNCTION_LINES
    )
    assert len(long) <= LONG_FUNCTIONS_ALLOWED, (
        f"{len(long)} library functions over {LONG_FUNCTION_LINES} lines (at most "
        f"{LONG_FUNCTIONS_ALLOWED}); split one into named steps: {long}")
