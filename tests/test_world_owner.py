"""One owner for the world and the protocol (issue 39): ``hpcpolicy.world`` alone opens a job
table into a workload, reads a site.toml and states the split's fractions; the commands share
one declaration of ``--policy`` and of ``--backfill``; a site model's ``[cadence] backfill``
reaches the engine; training workers open the world from the spec they receive."""

from __future__ import annotations

import ast
import json
import pickle
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from benchmarks.builders.job_tables import job_table, write_job_table
from hpcpolicy.commands import app
from hpcpolicy.env import EnvConfig
from hpcpolicy.env.factory import env_kwargs, make_env
from hpcpolicy.errors import ConfigError
from hpcpolicy.world import SiteModel, Split, WorldSpec, dumps, open_world
from hpcpolicy.world.protocol import TRAIN_FRAC, VAL_FRAC

ROOT = Path(__file__).resolve().parents[1]
OWNER = ROOT / "hpcpolicy" / "world"
"""The one package allowed to open tables, read site models and state the fractions."""


def _sources() -> list[Path]:
    files = [*(ROOT / "hpcpolicy").rglob("*.py"), *(ROOT / "commands").glob("*.py")]
    return sorted(p for p in files if OWNER not in p.parents)


def _named(node: ast.AST) -> str:
    """The name, attribute or string a node spells (lower case), else ''."""
    if isinstance(node, ast.Name):
        return node.id.lower()
    if isinstance(node, ast.Attribute):
        return node.attr.lower()
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value.lower()
    return ""


FRACTIONS = ("train_frac", "fit_frac", "val_frac")
"""The names the split's fractions go by."""


def _frac_literals(tree: ast.AST) -> list[int]:
    """Lines where the split's default fractions are written as numbers: as the default of a
    parameter or field of :data:`FRACTIONS`' names, or beside such a name in a comparison or
    a call."""
    lines = []
    for node in ast.walk(tree):
        pairs: list[tuple[str, ast.AST | None]] = []
        if isinstance(node, ast.AnnAssign | ast.Assign):
            targets = [node.target] if isinstance(node, ast.AnnAssign) else node.targets
            pairs += [(_named(t), node.value) for t in targets]
        elif isinstance(node, ast.arguments):
            args = [*node.posonlyargs, *node.args]
            pairs += list(zip([a.arg.lower() for a in args[len(args) - len(node.defaults):]],
                              node.defaults, strict=True))
            pairs += [(a.arg.lower(), d) for a, d in zip(node.kwonlyargs, node.kw_defaults,
                                                         strict=True)]
        elif isinstance(node, ast.Compare | ast.Call):
            parts = [node.left, *node.comparators] if isinstance(node, ast.Compare) \
                else [node.func, *node.args, *(k.value for k in node.keywords)]
            names = " ".join(_named(p) for p in parts)
            pairs += [(names, p) for p in parts]
        lines += [value.lineno for name, value in pairs
                  if any(f in name for f in FRACTIONS) and isinstance(value, ast.Constant)
                  and type(value.value) is float and value.value in (TRAIN_FRAC, VAL_FRAC)]
    return lines


def _offences(text: str, where: str) -> list[str]:
    tree = ast.parse(text)
    found = [f"{where}:{line}: a split fraction written as a number (use "
             "hpcpolicy.world.protocol)" for line in _frac_literals(tree)]
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr == "from_table":
            found.append(f"{where}:{node.lineno}: Workload.from_table (open_world/open_workload)")
        if isinstance(node, ast.Name | ast.alias) and \
                (node.id if isinstance(node, ast.Name) else node.name) == "load_site":
            found.append(f"{where}:{node.lineno}: load_site (WorldSpec.with_site)")
    return found


def test_only_the_world_opens_tables_reads_sites_and_states_the_split() -> None:
    texts = {path: path.read_text(encoding="utf-8") for path in _sources()}
    # only a module that names one of them can offend: parse those alone
    named = {p: t for p, t in texts.items() if any(s in t for s in ("from_table", "load_site",
                                                                      *FRACTIONS))}
    offences = [o for path, text in named.items()
                for o in _offences(text, str(path.relative_to(ROOT)))]
    assert not offences, "\n".join(offences)


@pytest.mark.parametrize("code,kind", [
    ("w = Workload.from_table(t)", "from_table"),
    ("from hpcpolicy.world import load_site", "load_site"),
    ("site = load_site(path)", "load_site"),
    ("def f(train_frac: float = 0.7) -> None: ...", "split fraction"),
    ("def f(*, val_frac: float = 0.1) -> None: ...", "split fraction"),
    ("x = opts.train_frac != 0.7", "split fraction"),
    ("y = p.get('fit_frac', 0.7)", "split fraction"),
    ("fit_frac: float = 0.7", "split fraction"),
])
def test_the_owner_test_sees_each_kind(code: str, kind: str) -> None:
    found = _offences(code, "probe.py")
    assert len(found) == 1 and kind in found[0], found


def test_the_owner_test_lets_other_numbers_be() -> None:
    assert not _offences("height = 0.7\nok = 0.0 < train_frac < 1.0\n"
                         "def f(train_frac: float = TRAIN_FRAC) -> None: ...\n", "p.py")


def _declared_options(path: Path) -> list[str]:
    """The ``--policy``/``--backfill`` names a module passes to ``typer.Option`` itself."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [f"{path.name}:{node.lineno}: {arg.value}" for node in ast.walk(tree)
            if isinstance(node, ast.Call) and _named(node.func) == "option"
            for arg in node.args
            if isinstance(arg, ast.Constant) and arg.value in ("--policy", "--backfill")]


def test_policy_and_backfill_are_declared_once() -> None:
    commands = sorted((ROOT / "commands").glob("*.py"))
    shared = _declared_options(ROOT / "commands" / "_options.py")
    assert sorted(s.split(": ")[1] for s in shared) == ["--backfill", "--policy"]
    own = [d for path in commands if path.name != "_options.py"
           for d in _declared_options(path)]
    assert not own, own


def test_world_spec_is_json_ready_and_picklable(tmp_path: Path) -> None:
    site = tmp_path / "site.toml"
    site.write_text(dumps(SiteModel(user_jobs=3, backfill="conservative")))
    spec = WorldSpec(procs=64, allocators=("best-fit",), split=Split(train_frac=0.6)
                     ).with_site(site)
    assert WorldSpec.from_dict(json.loads(json.dumps(spec.to_dict()))) == spec
    assert pickle.loads(pickle.dumps(spec)) == spec
    model = spec.site_model()
    assert model is not None and model.user_jobs == 3
    with pytest.raises(ConfigError, match="val_frac"):
        Split(train_frac=0.5, val_frac=0.5)
    assert Split().train_frac == TRAIN_FRAC


def _table(tmp_path: Path, n: int = 300) -> Path:
    rng = np.random.default_rng(5)
    rows = [{"submit": int(i * 20), "wait": 0, "user": f"u{i % 3}",
             "run_time_s": int(rng.integers(60, 3000)), "req_cpus": int(rng.choice([1, 8, 32])),
             "req_walltime_s": 3600} for i in range(n)]
    return write_job_table(tmp_path / "jobs.parquet", job_table(rows))


COMMANDS = {"simulate": (), "evaluate": ("-p", "fcfs", "--windows", "1", "--window-size", "60")}
"""The commands a site model's backfilling must reach, with their options for a small log."""


def _runs(command: str, table: Path, out: Path, *extra: str) -> list[object]:
    """Each run's figures (timings aside) of ``command`` on ``table``."""
    res = CliRunner().invoke(app, [command, str(table), "--procs", "32", "--json", str(out),
                                   "--overwrite", *COMMANDS[command], *extra])
    assert res.exit_code == 0, res.output
    runs = json.loads(out.read_text())["runs"]
    return [{k: v for k, v in r["summary"].items() if k != "engine_s"} for r in runs]


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_the_site_models_backfill_reaches_the_engine(tmp_path: Path, command: str) -> None:
    table = _table(tmp_path)
    site = tmp_path / "site.toml"
    site.write_text(dumps(SiteModel(backfill="conservative")))
    out = tmp_path / "s.json"
    by_site = _runs(command, table, out, "--site", str(site))
    given = _runs(command, table, out, "--site", str(site), "-b", "conservative")
    plain = _runs(command, table, out, "--site", str(site), "-b", "none")
    assert by_site == given
    assert by_site != plain  # backfilling changes this log's schedule


def test_workers_open_the_world_from_the_spec_not_the_file(tmp_path: Path) -> None:
    table = _table(tmp_path)
    site = tmp_path / "site.toml"
    site.write_text(dumps(SiteModel(user_jobs=2, interval_s=60)))
    spec = WorldSpec(procs=32).with_site(site)
    world = open_world(table, spec)
    kwargs = json.loads(json.dumps(env_kwargs(table, EnvConfig(window_size=50,
                                                               **world.env_options()), spec)))
    site.unlink()  # a worker never reads it again
    env = make_env(**kwargs).unwrapped
    assert (env.workload.submit % 60 == 0).all()  # the site's cadence moved the jobs
    assert env.config.sim_config().limits.user_jobs == 2


@pytest.mark.slow  # d3rlpy's import and two builds: about 25 s under load
def test_the_site_models_backfill_reaches_the_dataset_rollouts(tmp_path: Path) -> None:
    pytest.importorskip("d3rlpy")
    table = _table(tmp_path)
    site = tmp_path / "site.toml"
    site.write_text(dumps(SiteModel(backfill="conservative")))
    common = ["dataset", "build", str(table), "--procs", "32", "--source", "heuristics",
              "--heuristics", "fcfs", "--window-size", "40", "--max-windows", "1"]
    built = {}
    for name, extra in (("site", ["--site", str(site)]), ("plain", [])):
        res = CliRunner().invoke(app, [*common, *extra, "-o", str(tmp_path / name)])
        assert res.exit_code == 0, res.output
        manifest = json.loads((tmp_path / name / "manifest.json").read_text())
        built[name] = manifest["config"]["backfill"]
    assert built == {"site": "conservative", "plain": "easy"}  # the command's own default
