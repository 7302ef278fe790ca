"""The import layers: a module imports from its own layer or from lower ones, never in a cycle.

The layers, lowest first (a package stands for all its modules unless a module of it is
placed on its own; the longest listed prefix decides):

0. contracts: ``version``, ``errors``, ``schema`` (the job table),
   ``schemas`` (the JSON Schema files), ``atomic``, ``textfmt``, ``config`` (the base of every
   config dataclass), ``compat`` (the compatibility presets), and ``artifact`` (the policy
   artifact's files and manifest, shared by the writers in training and the readers in
   deploy; it needs neither torch nor training code), and ``hostlist`` (Slurm's form of
   node names, read by a cluster spec and by the Slurm flavour alike), and ``docload``
   (JSON and TOML documents read with size and nesting bounds), ``signature`` (a policy
   folder signed with a site key, checked by every reader of policies), ``durations`` (one
   parser for written lengths of time), ``slurmconf`` (a site's slurm.conf and sacctmgr dumps as a
   typed model, its changes and their diff), ``limits`` (the bounds input is read with);
1. the machine: ``cluster``;
2. ``ingest`` and ``generate`` (synthetic logs in SWF: another source of input);
3. what ingest writes, read back: ``table`` (opening a job table; a raw log given instead is
   recognised by ingest's detector), ``cluster_io`` (the cluster a table or a spec names),
   ``workload``, and ``stats`` (what a job table holds);
4. ``policies`` (the Policy protocol, the heuristics, and ``policies.settings``: what a policy
   reads from the run it is bound to, a protocol the simulator's configuration satisfies),
   and ``gpu`` (GPU placement, topology, sharing and the allocators: pure functions of a
   node's state, which the simulator's GPU engine calls);
5. ``sim``: the engines, the node-level GPU engine (``sim.gpu_engine``) among them;
6. ``world``: the world a log is replayed in (the site model, site.toml, the replay options
   and workload it sets, the train / validation / test split), which ``env`` and
   ``training`` build their episodes in;
7. ``env``;
8. the learners' base, ``learn`` (run folders, seeding, networks, export), below the
   learners: ``ppo``, ``offline``, ``marl``, ``hetero``;
9. ``deploy``: an artifact back into the simulator;
10. using policies: ``evaluate``, ``training`` (``hpcpolicy.train``, the one entry point that
    routes to the learners and finishes a run as a whole: the prior, the snapshot and the
    guard chosen on the validation part and the model card, each an evaluation, so it sits
    beside ``evaluate``), ``whatif``, ``site`` (fitting a world to a log and measuring a replay's
    fidelity), ``tune`` (population-based training that validates every candidate with
    ``evaluate``), ``slurm`` (``advise``: a policy ranks the live queue), ``sweep`` (a grid of
    what-if reports) and ``ray_support`` (Ray, the optional backend of ``tune`` and
    ``sweep``);
11. the front end: ``demo`` (the whole pipeline on a synthetic log), ``commands``, and the
    package root ``hpcpolicy`` itself, whose public names (``hpcpolicy.train``) come from
    below; it stands for its ``__init__`` only, not for the modules under it.

Packages are checked as well as modules: an import between two packages (``hpcpolicy.X``, a
folder or a top-level module) is an arrow between them; the arrows form no cycle, and at most
``MAX_PACKAGE_UPWARD`` of them run upward.

Every import counts: at module level, under ``if TYPE_CHECKING``, or inside a function.
Names built at run time (``importlib``, torchrun's ``-m`` module, a ``module:function``
factory) are not imports and are not seen.

Run ``python tests/test_layers.py [ROOT]`` for the counts on any checkout.
"""

from __future__ import annotations

import ast
import sys
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

SOURCES = {"hpcpolicy": "hpcpolicy", "commands": "hpcpolicy.commands",
           "schemas": "hpcpolicy.schemas"}
"""Top-level folders and the import name each installs as (pyproject's package-dir)."""

LAYERS: tuple[tuple[str, ...], ...] = (
    ("hpcpolicy.version", "hpcpolicy.errors", "hpcpolicy.schema", "hpcpolicy.schemas",
     "hpcpolicy.atomic", "hpcpolicy.textfmt", "hpcpolicy.config", "hpcpolicy.compat",
     "hpcpolicy.artifact", "hpcpolicy.hostlist", "hpcpolicy.docload", "hpcpolicy.durations",
     "hpcpolicy.signature",
     "hpcpolicy.slurmconf", "hpcpolicy.limits", "hpcpolicy.outlock"),
    ("hpcpolicy.cluster",),
    ("hpcpolicy.ingest", "hpcpolicy.generate"),
    ("hpcpolicy.table", "hpcpolicy.cluster_io", "hpcpolicy.workload", "hpcpolicy.stats"),
    ("hpcpolicy.policies", "hpcpolicy.gpu"),
    ("hpcpolicy.sim",),
    ("hpcpolicy.world",),
    ("hpcpolicy.env",),
    ("hpcpolicy.learn",),
    ("hpcpolicy.ppo", "hpcpolicy.offline", "hpcpolicy.marl", "hpcpolicy.hetero",
     "hpcpolicy.inspector"),
    ("hpcpolicy.deploy",),
    ("hpcpolicy.evaluate", "hpcpolicy.training", "hpcpolicy.whatif", "hpcpolicy.tune",
     "hpcpolicy.slurm", "hpcpolicy.site", "hpcpolicy.sweep", "hpcpolicy.ray_support"),
    ("hpcpolicy.demo", "hpcpolicy.commands", "hpcpolicy"),
)
"""Lowest first; see the module docstring for why each module is where it is."""

ALLOWED: Mapping[tuple[str, str], str] = {}
"""Upward imports that stay, (importer prefix, imported prefix) -> why. At most 3."""

MAX_PACKAGE_UPWARD = 3
"""The most package-level arrows that may run upward (the issue's bar)."""


@dataclass(frozen=True)
class Import:
    """One imported module, as written in one module."""

    importer: str
    imported: str
    line: int

    def __str__(self) -> str:
        return f"{self.importer}:{self.line} imports {self.imported}"


def module_names(root: Path, sources: Mapping[str, str] = SOURCES) -> dict[str, Path]:
    """Every module under ``root``'s source folders, by import name."""
    modules = {}
    for folder, name in sources.items():
        for path in sorted((root / folder).rglob("*.py")):
            parts = path.relative_to(root / folder).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            modules[".".join((name, *parts))] = path
    return modules


def _target(name: str, modules: Mapping[str, Path]) -> str | None:
    """The module ``name`` stands for: itself, else the package it is an attribute of."""
    while name not in modules and "." in name:
        name = name.rsplit(".", 1)[0]
    return name if name in modules else None


def _statements(root: Path, sources: Mapping[str, str]) -> Iterator[tuple[str, int, str, str]]:
    """(module, line, imported name, kind) for every import statement under ``root``,
    relative ones made absolute. Kinds: ``import`` (``import a.b``: a module), ``from`` (the
    ``a.b`` of ``from a.b import c``: a module) and ``name`` (its ``a.b.c``: a submodule, or
    a name defined in ``a.b``)."""
    modules = module_names(root, sources)
    for module, path in modules.items():
        package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    yield module, node.lineno, alias.name, "import"
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
                    base = ".".join([*anchor, base] if base else anchor)
                if node.module:
                    yield module, node.lineno, base, "from"
                for alias in node.names:
                    yield module, node.lineno, f"{base}.{alias.name}", "name"


def imports(root: Path, sources: Mapping[str, str] = SOURCES) -> list[Import]:
    """Every import of one of ``root``'s own modules by another, wherever it is written."""
    modules = module_names(root, sources)
    found = []
    for module, line, name, kind in _statements(root, sources):
        target = _target(name, modules)
        if kind != "from" and target is not None and target != module:
            found.append(Import(module, target, line))
    return found


def missing(root: Path, sources: Mapping[str, str] = SOURCES) -> list[str]:
    """Imports of a module of ``root``'s packages that does not exist (a module that moved):
    mypy does not see them, since it ignores missing imports."""
    modules = module_names(root, sources)
    roots = tuple(f"{name}." for name in sources.values())
    return [f"{module}:{line} imports {name}" for module, line, name, kind in
            _statements(root, sources)
            if kind != "name" and name.startswith(roots) and name not in modules]


def _match(module: str, prefixes: Iterable[str]) -> str | None:
    """The longest of ``prefixes`` that is ``module`` or a package above it; a top-level
    name (no dot) stands only for itself, so a new top-level module must be placed."""
    hits = [p for p in prefixes if module == p or ("." in p and module.startswith(p + "."))]
    return max(hits, key=len) if hits else None


def layer_of(module: str, layers: Sequence[Sequence[str]] = LAYERS) -> int | None:
    """The index of ``module``'s layer, None when no prefix places it."""
    owner = _match(module, [p for layer in layers for p in layer])
    return None if owner is None else next(i for i, layer in enumerate(layers)
                                           if owner in layer)


Pair = tuple[str, str]


def upward(found: Iterable[Import], layers: Sequence[Sequence[str]] = LAYERS,
           allowed: Mapping[Pair, str] = ALLOWED) -> tuple[list[Import], set[Pair]]:
    """The imports from a lower layer to a higher one that ``allowed`` does not name, and
    the ``allowed`` entries that were used."""
    bad: list[Import] = []
    used: set[Pair] = set()
    for imp in found:
        low, high = layer_of(imp.importer, layers), layer_of(imp.imported, layers)
        if low is None or high is None or low >= high:
            continue
        entry = next(((a, b) for a, b in allowed
                      if _match(imp.importer, [a]) and _match(imp.imported, [b])), None)
        if entry is None:
            bad.append(imp)
        else:
            used.add(entry)
    return bad, used


def cycles(found: Iterable[Import]) -> list[list[str]]:
    """The groups of modules that import one another, round and round (Tarjan's strongly
    connected components of two or more modules), each sorted."""
    graph: dict[str, set[str]] = defaultdict(set)
    for imp in found:
        graph[imp.importer].add(imp.imported)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            nxt = next(edges, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    groups.append(sorted(group))
    return sorted(groups)


@pytest.fixture(scope="module")
def found() -> list[Import]:
    return imports(ROOT)


def test_every_module_has_a_layer() -> None:
    unplaced = [m for m in module_names(ROOT) if layer_of(m) is None]
    assert not unplaced, f"place these modules in LAYERS: {unplaced}"


def test_every_import_names_a_module_that_exists() -> None:
    assert missing(ROOT) == []


def test_no_import_runs_upward(found: list[Import]) -> None:
    bad, _ = upward(found)
    assert not bad, "imports from a lower layer to a higher one:\n" + "\n".join(map(str, bad))


def test_the_allow_list_is_short_and_every_entry_is_needed(found: list[Import]) -> None:
    _, used = upward(found)
    assert len(ALLOWED) <= 3
    assert set(ALLOWED) == used, f"no longer needed, remove: {set(ALLOWED) - used}"


def test_no_import_cycles(found: list[Import]) -> None:
    assert cycles(found) == []


def package_of(module: str) -> str:
    """The package a module belongs to: ``hpcpolicy.X`` (a folder or a top-level module)."""
    return ".".join(module.split(".")[:2])


def package_imports(found: Iterable[Import]) -> list[Import]:
    """The imports between two different packages, as arrows between the packages."""
    return [Import(package_of(i.importer), package_of(i.imported), i.line) for i in found
            if package_of(i.importer) != package_of(i.imported)]


def test_no_package_cycles(found: list[Import]) -> None:
    assert cycles(package_imports(found)) == []


def test_few_package_arrows_run_upward(found: list[Import]) -> None:
    arrows = {(i.importer, i.imported) for i in package_imports(found)
              if (layer_of(i.importer) or 0) < (layer_of(i.imported) or 0)}
    assert len(arrows) <= MAX_PACKAGE_UPWARD, sorted(arrows)


def _tree(root: Path, files: Mapping[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_the_checker_finds_planted_upward_imports_and_cycles(tmp_path: Path) -> None:
    sources = {"pkg": "pkg"}
    layers = (("pkg.low",), ("pkg.high",))
    clean = _tree(tmp_path / "clean", {
        "pkg/__init__.py": "",
        "pkg/low/__init__.py": "",
        "pkg/low/a.py": "import os\n",
        "pkg/high/__init__.py": "",
        "pkg/high/b.py": "from pkg.low import a\nfrom ..low.a import x\n",
    })
    found = imports(clean, sources)
    assert {(i.importer, i.imported) for i in found} == {("pkg.high.b", "pkg.low.a")}
    assert upward(found, layers, {}) == ([], set()) and cycles(found) == []

    planted = _tree(tmp_path / "planted", {
        "pkg/__init__.py": "",
        "pkg/low/__init__.py": "",
        "pkg/low/a.py": ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                         "    from pkg.high.b import B\n"
                         "def f():\n    from pkg.low import c\n"),
        "pkg/low/c.py": "def g():\n    import pkg.low.a\n    from pkg.low.gone import x\n",
        "pkg/high/__init__.py": "",
        "pkg/high/b.py": "class B: ...\n",
    })
    found = imports(planted, sources)
    bad, _ = upward(found, layers, {})
    assert [(i.importer, i.imported, i.line) for i in bad] == [("pkg.low.a", "pkg.high.b", 3)]
    assert cycles(found) == [["pkg.low.a", "pkg.low.c"]]
    assert missing(planted, sources) == ["pkg.low.c:3 imports pkg.low.gone"]
    assert missing(clean, sources) == []
    reason = {("pkg.low.a", "pkg.high"): "why"}
    assert upward(found, layers, reason) == ([], set(reason))


def report(root: Path) -> str:
    """The counts for ``root``: upward imports (module pairs, and those not allowed), cycles."""
    found = imports(root)
    pairs = {(i.importer, i.imported) for i in found
             if (layer_of(i.importer) or 0) < (layer_of(i.imported) or 0)}
    bad, _ = upward(found)
    lines = [f"{root}: {len(pairs)} upward imports (module pairs), "
             f"{len({(i.importer, i.imported) for i in bad})} beyond the allow-list; "
             f"{len(cycles(found))} cycles"]
    lines += [f"  up: {a} -> {b}" for a, b in sorted(pairs)]
    lines += [f"  cycle: {' <-> '.join(group)}" for group in cycles(found)]
    return "\n".join(lines)


if __name__ == "__main__":
    print(report(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT))
