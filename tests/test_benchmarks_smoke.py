"""Every benchmark runs: each one's ``main`` at tiny sizes, in this process (issue 39 item 5).

A smoke run goes through the benchmark's real code path (the same functions, commands and
JSON it writes at full size) on a few jobs, windows or calls, so that a benchmark broken by a
change to the library fails here instead of on the day someone re-measures a figure. Every
module of ``benchmarks/`` is either smoked here, run against the test Slurm (``slurm``
marker), or named in :data:`NOT_SMOKED` with the reason; :func:`test_every_benchmark_is_listed`
keeps it so.
"""

from __future__ import annotations

import ast
import importlib
import json
from pathlib import Path
from typing import Any

import pytest
from conftest import shared_file

from benchmarks._common import OPENB_NODES, OPENB_PODS, TRACES

ROOT = Path(__file__).resolve().parent.parent

HELPERS = {"__init__", "_common", "cli", "gpu_workloads"}
"""Modules of ``benchmarks/`` that are helpers of the others, not benchmarks."""

Case = tuple[list[str], tuple[str, ...]]
"""A smoke run: the arguments besides ``--out`` ({cache}: the traces' cache for all runs), and
the shared traces it reads (names of the trace table, or other files of the shared data)."""
CACHE = ["--cache", "{cache}"]
KTH_CELL = [*CACHE, "--traces", "KTH-SP2", "--backfills", "easy", "--windows", "1",
            "--window-size", "32"]
"""One cell of the per-cell studies of :mod:`benchmarks.generalisation`, one small window."""

SMOKE: dict[str, Case] = {
    "env": ([*CACHE, "--seconds", "0.02", "--window-size", "32", "--k", "8", "--traces",
             "lublin_256", "--backfills", "easy"], ("lublin_256",)),
    "fallback_choice": ([*KTH_CELL, "--seeds", "1", "--recent", "2"], ("KTH-SP2",)),
    "formula_search": ([*KTH_CELL, "--seeds", "1", "--candidates", "3", "--top", "1",
                        "--train-windows", "1"], ("KTH-SP2",)),
    "heuristic_switch": ([*KTH_CELL, "--fit-windows", "1", "--iterations", "1",
                          "--population", "2", "--elite", "1"], ("KTH-SP2",)),
    "inference": (["--k", "8", "--calls", "3", "--warmup", "1"], ()),
    "marl_latency": (["--jobs", "300", "--calls", "3", "--warmup", "1"], ()),
    "concurrent_outputs": (["--rounds", "1", "--reads", "1"], ()),
    "fuzz_readers": (["--examples", "2", "--reader", "swf"], ()),
    "input_bombs": (["--scale", "0.001", "--only", "swf_zeros"], ()),
}
"""The benchmarks smoked in the default suite, with their tiny arguments."""

SLOW: dict[str, Case] = {
    # torchrun start-up, training, swf2sacct over the whole HPC2N trace, dataset builds or
    # the whole trace by design: 20 s to minutes each even at these sizes on the 2-core
    # machine, so they run with `pytest -m slow`
    "ddppo_scaling": ([*CACHE, "--trace", "lublin_256", "--workers", "1", "--updates", "2",
                       "--repeats", "1", "--warmup-updates", "0", "--no-side-by-side",
                       "--num-envs", "1", "--num-steps", "16", "--num-minibatches", "1",
                       "--k", "8"], ("lublin_256",)),
    "offline": ([*CACHE, "--traces", "KTH-SP2", "--max-windows", "1", "--workers", "1",
                 "--windows", "1", "--window-size", "32"], ("KTH-SP2",)),
    "gpu_quality": ([*CACHE, "--workloads", "hpc2n-gpu", "--no-train", "--windows", "1",
                     "--window-size", "32"], ("HPC2N",)),
    "kill_outputs": (["--target", "export", "--kills", "1"], ("HPC2N", "KTH-SP2")),
    "ingest": ([*CACHE, "--sacct-repeat", "1", "--swf-repeat", "1"], ("HPC2N", "RICC")),
    "whatif": ([*CACHE, "--repeat", "1"], ("HPC2N", "RICC")),
    "whatif_10m": ([*CACHE, "--repeat", "1", "--timeout", "300"], ("HPC2N", "RICC")),
    "train_quality": ([*CACHE, "--traces", "lublin_256", "--backfills", "none", "--steps", "64",
                       "--workers", "1", "--train-window", "32", "--windows", "1",
                       "--window-size", "32", "--runs", "{cache}/train_quality"],
                      ("lublin_256",)),
    "engine_floor": ([*CACHE, "--repeat", "1", "--runs", "1", "--lublin", "1000"],
                     ("HPC2N",)),
    "capacity": ([*CACHE, "--repeat", "1", "--outages", "5", "--timeout", "300"],
                 ("HPC2N", "RICC")),
    "gpu_learned_allocator": (["--train-seeds", "0", "--test-seeds", "42", "--rounds", "1",
                               "--population", "4"], (OPENB_PODS, OPENB_NODES)),
    "gpu_fragmentation": (["--seeds", "42", "--allocators", "fgd"],
                          (OPENB_PODS, OPENB_NODES)),
    "gpu_timed_replay": (["--allocators", "bestfit", "--scenario", ""],
                         (OPENB_PODS, OPENB_NODES)),
    "site": ([*CACHE, "--traces", "KTH-SP2"], ("KTH-SP2",)),
    "inspector": ([*KTH_CELL, "--train-windows", "1", "--train-window-size", "32",
                   "--dagger-rounds", "0", "--runs", "{cache}/inspector"], ("KTH-SP2",)),
    "simulate": ([*CACHE, "--repeat", "1", "--no-reference", "--timeout", "300"],
                 ("HPC2N", "RICC")),
    "slurm_world": ([*CACHE, "--repeat", "2", "--runs", "1", "--jobs", "2000"], ("HPC2N",)),
}
"""Benchmarks smoked with ``pytest -m slow``: tiny arguments still, but too long for the
default suite's 60 s for all benchmarks together."""

DIR_OUT = {"gpu_fragmentation", "gpu_learned_allocator", "gpu_timed_replay"}
"""Benchmarks whose ``--out`` is a folder of files rather than one JSON."""

TRAINED = {"generalisation", "seed_ensemble", "tune_ray"}
"""Benchmarks of trained policies, smoked (slow) in tests of their own below."""

SLURM = {"advise", "slurm_policy", "slurm_replay", "slurm_placement"}
"""Benchmarks of a real Slurm: smoked (slow) against the test Slurm (``slurm`` marker), with
SLURM_CONF naming it as ``tests/slurm/up.sh`` prints it."""

NOT_SMOKED: dict[str, str] = {}
"""Benchmarks with no smoke run, and why."""

REPLAYED = {"slurm_config"}
"""Benchmarks smoked on kept real runs (their collection needs the real Slurm for minutes)."""


@pytest.fixture(scope="module")
def trace_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One ingest of each shared trace for all the smoke runs."""
    return tmp_path_factory.mktemp("bench-cache")


def _main(name: str, argv: list[str]) -> Any:
    """``benchmarks/NAME.py``'s ``main(argv)``."""
    return importlib.import_module(f"benchmarks.{name}").main(argv)


def test_every_benchmark_is_listed() -> None:
    modules = {p.stem for p in (ROOT / "benchmarks").glob("*.py")} - HELPERS
    listed = set(SMOKE) | set(SLOW) | TRAINED | SLURM | REPLAYED | set(NOT_SMOKED)
    assert modules - listed == set(), "benchmarks with no smoke run: list them in SMOKE"
    assert listed - modules == set(), "listed benchmarks that do not exist"


def _edits_sys_path(path: Path) -> bool:
    """Whether the module at ``path`` names ``sys.path`` anywhere."""
    return any(isinstance(node, ast.Attribute) and node.attr == "path"
               and isinstance(node.value, ast.Name) and node.value.id == "sys"
               for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))))


def test_no_benchmark_edits_sys_path() -> None:
    """The benchmarks are a package: they import one another as ``benchmarks.NAME`` and run
    as ``python -m benchmarks.NAME``, never by putting a folder on ``sys.path``."""
    editing = {p.stem for p in (ROOT / "benchmarks").glob("*.py") if _edits_sys_path(p)}
    assert editing == set()


@pytest.mark.parametrize("name", [*sorted(SMOKE), *(pytest.param(name, marks=pytest.mark.slow)
                                                    for name in sorted(SLOW))])
def test_benchmark_smoke(name: str, tmp_path: Path, trace_cache: Path) -> None:
    args, traces = {**SMOKE, **SLOW}[name]
    for needed in traces:
        shared_file(TRACES[needed].file if needed in TRACES else needed)
    out = tmp_path / (name if name in DIR_OUT else f"{name}.json")
    argv = [arg.format(cache=trace_cache) for arg in args]
    assert _main(name, [*argv, "--out", str(out)]) in (0, None)
    assert any(out.iterdir()) if name in DIR_OUT else json.loads(out.read_text(encoding="utf-8"))


@pytest.mark.slow
def test_slurm_config_smoke_on_the_kept_runs(tmp_path: Path) -> None:
    """slurm_config judges the Slurm world against the real runs kept in tests/data (replay
    only: collecting them takes the real Slurm about an hour)."""
    import tarfile

    shared_file(TRACES["KTH-SP2"].file)
    with tarfile.open(ROOT / "tests/data/slurm_config_runs.tar.gz") as kept:
        kept.extractall(tmp_path, filter="data")
    assert _main("slurm_config", ["--out", str(tmp_path / "runs"), "--no-collect"]) in (0, None)
    assert json.loads((tmp_path / "runs" / "table.json").read_text(encoding="utf-8"))


@pytest.mark.slow
def test_generalisation_then_seed_ensemble_smoke(tmp_path: Path, trace_cache: Path) -> None:
    """generalisation trains one policy (a few DD-PPO steps) and evaluates it; seed_ensemble
    then votes with the policy of that run."""
    shared_file(TRACES["KTH-SP2"].file)
    runs, cell = tmp_path / "runs", [arg.format(cache=trace_cache) for arg in KTH_CELL]
    out = tmp_path / "generalisation.json"
    assert _main("generalisation", [*cell, "--seeds", "1", "--modes", "within", "--steps",
                                    "64", "--workers", "1", "--runs", str(runs),
                                    "--out", str(out)]) == 0
    assert json.loads(out.read_text(encoding="utf-8"))["cells"]
    out = tmp_path / "seed_ensemble.json"
    assert _main("seed_ensemble", [*cell, "--runs", str(runs), "--seeds", "1",
                                   "--out", str(out)]) == 0
    assert json.loads(out.read_text(encoding="utf-8"))["cells"]


@pytest.mark.slow
def test_tune_ray_smoke(ray_module: object, tmp_path: Path) -> None:
    """tune_ray: a population of two, serial and on a Ray started here."""
    out = tmp_path / "tune_ray.json"
    assert _main("tune_ray", ["--population", "2", "--steps", "2048", "--interval", "1024",
                              "--jobs", "400", "--window-size", "32", "--member-cpus", "1",
                              "--out", str(out)]) in (0, None)
    assert json.loads(out.read_text(encoding="utf-8"))


@pytest.mark.slurm
@pytest.mark.slow
def test_slurm_benchmarks_smoke(slurm_cluster: Any, tmp_path: Path,
                                monkeypatch: pytest.MonkeyPatch) -> None:
    """advise, slurm_replay (four jobs in real time: about 20 s, and the cluster's start),
    then slurm_placement on its log."""
    shared_file(TRACES["KTH-SP2"].file)
    monkeypatch.setenv("SLURM_CONF", str(slurm_cluster.conf))
    log = tmp_path / "log"
    runs = {"advise": ["--jobs", "3", "--passes", "1"],
            "slurm_replay": ["--jobs", "4", "--arrivals-s", "4", "--max-run-s", "5",
                             "--log-dir", str(log)],
            "slurm_placement": ["--log-dir", str(log)]}
    for name, args in runs.items():
        out = tmp_path / f"{name}.json"
        assert _main(name, [*args, "--json", str(out)]) == 0
        assert json.loads(out.read_text(encoding="utf-8"))


@pytest.mark.slurm
@pytest.mark.slow
def test_slurm_policy_smoke(slurm_cluster: Any, tmp_path: Path,
                            monkeypatch: pytest.MonkeyPatch) -> None:
    """slurm_policy: a baseline run and an ``advise --apply`` run, minutes in real time."""
    shared_file(TRACES["KTH-SP2"].file)
    monkeypatch.setenv("SLURM_CONF", str(slurm_cluster.conf))
    out = tmp_path / "slurm_policy.json"
    assert _main("slurm_policy", ["--jobs", "4", "--arrivals-s", "4", "--json", str(out)]) == 0
    assert json.loads(out.read_text(encoding="utf-8"))["runs"]
