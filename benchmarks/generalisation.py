"""The generalisation protocol of issue 27: does the policy a user trains with the README's
command keep beating the heuristics on the site's next months, and at another site?

**Within a site** (``--modes within``), for each shared trace with requested times (CTC-SP2,
HPC2N, KTH-SP2, RICC) x backfilling (``--backfills``: easy, none) x seed (``--seeds``):

1. ``hpcpolicy train TABLE --algo ddppo --workers 2 --steps N --seed S [--backfill easy]``,
   the README recipe with its defaults, run as :func:`hpcpolicy.train`: episodes from the
   first 60 % of the jobs, the next 10 % validate (snapshot choice and guard,
   :mod:`hpcpolicy.training.card`), the last 30 % are left;
2. ``hpcpolicy evaluate`` of the policy and every heuristic on ``--windows`` windows of
   ``--window-size`` jobs of the last 30 %, same backfilling; the *deployed* policy is what
   its guard runs (the fallback heuristic when active, as ``simulate``, ``whatif`` and
   ``advise`` do), so its score is that heuristic's on the same windows.

Bars (per trace x backfilling, mean over seeds): deployed never worse than the best heuristic;
>= 10 % better on at least half of the cells.

**Across sites** (``--modes across``): the policies of ``--train-on`` (each trained as above,
reused when the within mode ran) are evaluated on the last 30 % of every other trace; bar:
the deployed policy never worse than FCFS there (the best heuristic is reported too).

Writes JSON (default ``benchmarks/results/generalisation.json``) and prints one line. Train
wall times are recorded (the bar: <= 30 min per trace and mode on the 2-core machine).

Usage:
    python -m benchmarks.generalisation --traces KTH-SP2 --backfills easy --seeds 1 \
        --steps 20000 --windows 5        # a reduced run
    python -m benchmarks.generalisation --steps 1000000   # the full protocol (hours)
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import hpcpolicy
from benchmarks._common import (
    RESULTS,
    ROOT,
    TRACES,
    TRAIN_FRAC,
    VAL_FRAC,
    ingest_trace,
    procs_options,
)
from benchmarks.cli import hpcpolicy_cli
from hpcpolicy.atomic import write_json
from hpcpolicy.deploy.resolve import policy_simulator
from hpcpolicy.env.factory import load
from hpcpolicy.errors import HpcPolicyError
from hpcpolicy.evaluate import EvaluateConfig
from hpcpolicy.policies.heuristics import HEURISTICS
from hpcpolicy.sim.windows import WindowConfig, replay
from hpcpolicy.training import TrainOptions
from hpcpolicy.training.validation import VALIDATION_WINDOWS
from hpcpolicy.world.split import split_starts, validation_starts

if TYPE_CHECKING:
    from hpcpolicy.cluster import ClusterSpec
    from hpcpolicy.policies.base import Policy
    from hpcpolicy.workload import Workload

STUDIED = ("CTC-SP2", "HPC2N", "KTH-SP2", "RICC")
"""The shared traces with requested times: the cells studied by default."""
BAR = -0.10
Cell = dict[str, Any]
"""What a per-cell study measured on one trace x backfilling."""


@dataclass(frozen=True)
class Trace:
    """A shared trace, loaded as :data:`~benchmarks._common.TRACES` says, replayed under one
    backfilling mode on windows of ``size`` jobs: what the per-cell studies replay."""

    workload: Workload
    machine: ClusterSpec
    backfill: str
    size: int
    warm: bool

    @classmethod
    def of(cls, name: str, backfill: str, a: argparse.Namespace) -> Trace:
        """Trace ``name`` (ingested once into ``a.cache``), windows of ``a.window_size``."""
        trace = TRACES[name]
        workload, machine = load(ingest_trace(name, a.cache), None, None, trace.procs)
        return cls(workload, machine, backfill, a.window_size, trace.warm)

    def starts(self, split: str, count: int, seed: int,
               train_frac: float = TRAIN_FRAC) -> tuple[int, ...]:
        """``count`` random windows of part ``split``, drawn as ``hpcpolicy evaluate`` draws
        them (the test part with seed 1: the protocol's test windows)."""
        return split_starts(len(self.workload), split, train_frac,
                            WindowConfig(size=self.size, count=count, seed=seed))

    def validation(self, end: float = TRAIN_FRAC) -> tuple[int, ...]:
        """The card's side-by-side validation windows over the :data:`VAL_FRAC` of jobs that
        ends at ``end`` (default: the guard's validation part)."""
        return validation_starts(len(self.workload), end, VAL_FRAC, size=self.size,
                                 count=VALIDATION_WINDOWS)

    def scores(self, policies: Mapping[str, Policy | None],
               starts: tuple[int, ...]) -> dict[str, list[float]]:
        """Mean bsld of each window at ``starts`` for each policy (None: the heuristic of that
        name), replayed as :func:`hpcpolicy.evaluate.evaluate` replays them."""
        cfg = EvaluateConfig(backfills=(self.backfill,), window_size=self.size, starts=starts,
                             split="all", warm=self.warm)
        runs = replay(self.workload, self.machine,
                      [cfg.sim_config(name, self.backfill) for name in policies],
                      cfg.window_config(),
                      simulate=policy_simulator({n: p for n, p in policies.items() if p}))
        return {run.config.policy: [float(w.summary["mean_bsld"]) for w in run.windows]
                for run in runs}


def add_cell_options(p: argparse.ArgumentParser, name: str, windows: int = 20) -> None:
    """The options every per-cell study of the protocol takes: which traces and backfilling
    modes, the test windows, the trace cache, and the JSON out (``results/NAME.json``)."""
    p.add_argument("--traces", default=",".join(STUDIED))
    p.add_argument("--backfills", default="easy,none")
    p.add_argument("--windows", type=int, default=windows, help="test windows")
    p.add_argument("--window-size", type=int, default=1024)
    p.add_argument("--cache", type=Path,
                   default=Path(tempfile.gettempdir()) / "hpcpolicy-generalisation")
    p.add_argument("--out", type=Path, default=RESULTS / f"{name}.json")


def cells_of(a: argparse.Namespace) -> list[tuple[str, str]]:
    """(trace, backfill) of every cell ``a`` asks for, backfilling outermost; exits on an
    unknown trace."""
    traces = a.traces.split(",")
    unknown = sorted(set(traces) - set(TRACES))
    if unknown:
        raise SystemExit(f"--traces {','.join(unknown)}: not one of {', '.join(TRACES)}")
    return [(name, backfill) for backfill in a.backfills.split(",") for name in traces]


def each_cell(a: argparse.Namespace, cell: Callable[[str, str, argparse.Namespace], Cell],
              line: Callable[[Cell], str]) -> list[Cell]:
    """``cell(trace, backfill, a)`` for every cell of :func:`cells_of`; the cells measured so far
    are written to ``a.out`` after each (a long run stopped keeps them), with a ``line``."""
    cells: list[Cell] = []
    for name, backfill in cells_of(a):
        cells.append(cell(name, backfill, a))
        write_json(a.out, {"argv": sys.argv[1:], "cells": cells})
        print(line(cells[-1]), flush=True)
    return cells


def machine_options(name: str) -> list[str]:
    """:data:`~benchmarks._common.TRACES`' options of the trace ``name`` as command-line
    flags."""
    return [*procs_options(name), *(["--warm"] if TRACES[name].warm else [])]


def _run(args: list[str]) -> None:
    proc = subprocess.run([*hpcpolicy_cli(), "-q", *args], capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"hpcpolicy {' '.join(args)} failed: {proc.stderr.strip()[-400:]}")


def train(table: Path, run: Path, backfill: str, seed: int, a: argparse.Namespace) -> float:
    """The README recipe, through :func:`hpcpolicy.train` (the policy folder ``hpcpolicy
    train`` leaves: snapshot, card and guard); its wall time (reused, 0.0, when ``run``
    already has a card)."""
    if (run / "policy" / "card.json").is_file():
        return 0.0
    trace = TRACES[table.stem]
    start = time.perf_counter()
    try:
        hpcpolicy.train(table, algo="ddppo", out=run, options=TrainOptions(
            workers=a.workers, steps=a.steps, seed=seed, backfill=backfill, procs=trace.procs,
            warm=trace.warm, **({} if a.prior is None else {"prior": a.prior})))
    except HpcPolicyError as exc:
        raise SystemExit(f"train {table} ({backfill}, seed {seed}): {exc}") from None
    return time.perf_counter() - start


def deployed_score(table: Path, policy: Path, backfill: str, a: argparse.Namespace,
                   out: Path) -> dict[str, Any]:
    """``hpcpolicy evaluate`` of the policy and the heuristics on the test part; the deployed
    policy's score is its guard's fallback's when the guard is active."""
    from hpcpolicy.deploy.guard import active_guard

    _run(["evaluate", str(table), "--policy", ",".join((*HEURISTICS, str(policy))),
          "--backfill", backfill, "--windows", str(a.windows), "--window-size",
          str(a.window_size), "--seed", "1", "--json", str(out), "--overwrite",
          *machine_options(table.stem)])
    doc = json.loads(out.read_text(encoding="utf-8"))
    scores = {r["policy"]: r["summary"]["mean_bsld"] for r in doc["runs"]}
    learned = scores.pop(str(policy))
    fallback = active_guard(str(policy))
    deployed = learned if fallback is None else scores[fallback]
    best, best_bsld = min(scores.items(), key=lambda kv: kv[1])
    return {"heuristics": scores, "learned": learned, "guard": fallback,
            "deployed": deployed, "best_heuristic": best,
            "versus_best": deployed / best_bsld - 1.0,
            "versus_fcfs": deployed / scores["fcfs"] - 1.0}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_cell_options(p, "generalisation", windows=10)
    p.add_argument("--seeds", default="1,2,3")
    p.add_argument("--modes", default="within,across")
    p.add_argument("--train-on", default="HPC2N", help="across: traces trained on")
    p.add_argument("--steps", type=int, required=True, help="training steps per run")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--prior", help="train's --prior (default: train's own default)")
    p.add_argument("--runs", type=Path, default=ROOT / "runs" / "generalisation")
    a = p.parse_args(argv)
    traces = list(dict.fromkeys(name for name, _ in cells_of(a)))
    modes, seeds = a.modes.split(","), [int(s) for s in a.seeds.split(",")]
    cells: list[dict[str, Any]] = []
    across: list[dict[str, Any]] = []
    for backfill in a.backfills.split(","):
        trained_on = traces if "within" in modes else []
        if "across" in modes:
            trained_on = list(dict.fromkeys([*trained_on, *a.train_on.split(",")]))
        for name in trained_on:
            table = ingest_trace(name, a.cache)
            for seed in seeds:
                run = a.runs / f"{name}-{backfill}-s{seed}"
                wall = train(table, run, backfill, seed, a)
                card = json.loads((run / "policy" / "card.json").read_text(encoding="utf-8"))
                if "within" in modes and name in traces:
                    cells.append({"trace": name, "backfill": backfill, "seed": seed,
                                  "steps": a.steps, "train_wall_s": wall,
                                  "selection": card.get("selection"), "card_guard": card["guard"],
                                  **deployed_score(table, run / "policy", backfill, a,
                                                   run / "test.json")})
                    _save(a.out, cells, across)
                if "across" in modes and name in a.train_on.split(","):
                    for other in (t for t in traces if t != name):
                        score = deployed_score(ingest_trace(other, a.cache), run / "policy",
                                               backfill, a, run / f"on-{other}.json")
                        across.append({"trained_on": name, "tested_on": other,
                                       "backfill": backfill, "seed": seed, **score})
                        _save(a.out, cells, across)
    summary = _save(a.out, cells, across)
    print(f"generalisation: {summary['text']} -> {a.out}")
    return 0


def _save(out: Path, cells: list[dict[str, Any]], across: list[dict[str, Any]]) -> dict[str, Any]:
    """Write what is measured so far (after every cell: a long run stopped keeps them)."""
    summary = _summary(cells, across)
    write_json(out, {"argv": sys.argv[1:], "cells": cells, "across": across,
                     "summary": summary})
    return summary


def _mean(rows: list[dict[str, Any]], key: str) -> float:
    return sum(float(r[key]) for r in rows) / len(rows)


def _summary(cells: list[dict[str, Any]], across: list[dict[str, Any]]) -> dict[str, Any]:
    """Per trace x backfilling, the mean over seeds, and the bars."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for c in cells:
        groups.setdefault((c["trace"], c["backfill"]), []).append(c)
    per_cell: list[dict[str, Any]] = [{"trace": t, "backfill": b, "seeds": len(rows),
                 "versus_best": _mean(rows, "versus_best"),
                 "guard_active": sum(r["guard"] is not None for r in rows)}
                for (t, b), rows in groups.items()]
    never_worse = sum(c["versus_best"] <= 0.0 for c in per_cell)
    ten = sum(c["versus_best"] <= BAR for c in per_cell)
    fcfs_ok = sum(r["versus_fcfs"] <= 0.0 for r in across)
    text = (f"{len(per_cell)} trace x backfill cell(s): deployed never worse than the best "
            f"heuristic in {never_worse}, >= 10 % better in {ten}; across sites: not worse "
            f"than FCFS in {fcfs_ok}/{len(across)}")
    return {"cells": per_cell, "never_worse": never_worse, "ten_percent_better": ten,
            "across_not_worse_than_fcfs": fcfs_ok, "across": len(across), "text": text}


if __name__ == "__main__":
    raise SystemExit(main())
