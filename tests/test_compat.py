"""``--compat``: one preset per peer names its behaviours; no other code compares the name."""

from __future__ import annotations

import ast

import pytest
from conftest import ROOT

from hpcpolicy.compat import COMPAT_NAMES, compat_preset
from hpcpolicy.errors import ConfigError
from hpcpolicy.sim.types import SimConfig
from hpcpolicy.workload import WorkloadOptions


def test_presets_name_the_behaviours() -> None:
    own, rls, hpcopt = (compat_preset(n) for n in (None, "rlscheduler", "hpcopt"))
    assert (own.peer_engine, rls.peer_engine, hpcopt.peer_engine) == (False, True, False)
    assert (own.utilization_end, rls.utilization_end) == ("last_end", "last_start")
    assert rls.exclusive_nodes and not hpcopt.exclusive_nodes
    assert WorkloadOptions.preset("rlscheduler").procs_from == rls.workload["procs_from"]
    assert SimConfig(compat="rlscheduler").preset is rls
    assert SimConfig(compat="hpcopt", backfill="conservative").preset is hpcopt
    with pytest.raises(ConfigError, match="compat 'rlscheduler' has no conservative"):
        SimConfig(compat="rlscheduler", backfill="conservative")


def test_unknown_name_lists_the_known_ones() -> None:
    with pytest.raises(ConfigError, match="compat 'pbs' is not one of rlscheduler, hpcopt"):
        compat_preset("pbs")
    assert COMPAT_NAMES == ("rlscheduler", "hpcopt")


def test_slurm_is_refused_where_it_is_not_offered() -> None:
    # --compat slurm replaces the engine in simulate and fidelity only; the commands that
    # build a workload or SimConfig from a peer's preset (train, evaluate, tune) say where
    with pytest.raises(ConfigError, match="offered by `hpcpolicy simulate` and `hpcpolicy "
                       "fidelity` only"):
        WorkloadOptions.preset("slurm")


def _compared_names(source: str) -> list[int]:
    """Lines where a peer's name is compared with == / != / in (outside the presets)."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            if any(isinstance(o, ast.Constant) and o.value in COMPAT_NAMES for o in operands):
                lines.append(node.lineno)
    return lines


def test_the_peer_is_decided_once_in_its_preset() -> None:
    files = [*(ROOT / "hpcpolicy").rglob("*.py"), *(ROOT / "commands").rglob("*.py")]
    found = {str(f.relative_to(ROOT)): _compared_names(f.read_text(encoding="utf-8"))
             for f in files if f.name != "compat.py" or f.parent.name != "hpcpolicy"}
    assert {f: lines for f, lines in found.items() if lines} == {}
    assert _compared_names('if cfg.compat == "rlscheduler":\n    pass\n') == [1]
