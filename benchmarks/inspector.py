"""Issue 43 item 2: does an inspector over the validation-chosen heuristic beat that heuristic
on the site's later months?

For each shared trace x backfilling mode (``--traces``, ``--backfills``):

1. the validation-chosen heuristic, as ``train --prior auto`` and the guard choose it
   (:func:`hpcpolicy.training.prior.prior_for`: the best on the validation part, 60-70 %);
2. an inspector over it, trained by imitating each training window's best heuristic on the
   fitting part (0-60 %; :func:`hpcpolicy.inspector.train.train_inspector`), written as an
   artifact (format ``hpcpolicy.inspector``);
3. its model card (:func:`hpcpolicy.training.card.build_card`): the guard is decided on the
   validation part by the card's rule (deployed only if it beats the best heuristic there,
   which is the inspected one, with 95 % one-sided confidence); test figures on 10 windows;
4. on ``--windows`` windows of the test part (70-100 %, seed 1): the inspector (raw), what is
   deployed (the inspector, or the heuristic when the guard is active), the heuristic, every
   proposing heuristic and the hindsight bound (each window's best heuristic); the paired
   95 % interval of ``inspector - heuristic`` over windows (a percentile bootstrap,
   :func:`hpcpolicy.deploy.improvement.decide` at 97.5 % each side) and the share of the
   hindsight bound captured.

Writes JSON (default ``benchmarks/results/inspector.json``) after every cell and prints one
line per cell. This is also the inspector's training entry point until ``hpcpolicy train``
routes ``--algo inspector`` (:func:`train_cell`).

Usage:
    python -m benchmarks.inspector --traces KTH-SP2,CTC-SP2 --backfills easy,none
    python -m benchmarks.inspector --traces KTH-SP2 --backfills easy --train-windows 4 \
        --windows 4 --window-size 256      # a smoke run
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks._common import ROOT, TRACES, ingest_trace
from benchmarks.generalisation import Cell, Trace, add_cell_options, each_cell
from hpcpolicy.atomic import file_sha256
from hpcpolicy.deploy.guard import active_guard
from hpcpolicy.deploy.improvement import decide
from hpcpolicy.inspector.artifact import InspectorPolicy
from hpcpolicy.inspector.features import RANKERS
from hpcpolicy.inspector.train import InspectorConfig, train_inspector
from hpcpolicy.training.card import build_card, write_card
from hpcpolicy.training.options import TrainOptions
from hpcpolicy.training.prior import prior_for


def paired(policy: list[float], base: list[float]) -> dict[str, Any]:
    """Mean of ``policy - base`` over paired windows with its two-sided 95 % percentile
    bootstrap interval, and the same relative to ``base``'s mean."""
    high = decide(policy, base, confidence=0.975)["upper_bound"]
    low = decide(base, policy, confidence=0.975)["upper_bound"]
    mean = float(np.mean(policy) - np.mean(base))
    scale = float(np.mean(base))
    interval = None if high is None or low is None else [-low, high]
    return {"mean_difference": mean, "interval95": interval,
            "relative": mean / scale,
            "relative_interval95": None if interval is None else [v / scale for v in interval],
            "better": interval is not None and interval[1] < 0,
            "worse": interval is not None and interval[0] > 0}


def train_cell(name: str, backfill: str, a: argparse.Namespace) -> tuple[Trace, Path, str,
                                                                       dict[str, Any]]:
    """The inspector of one cell, trained and carded: the trace, the policy folder, the
    inspected heuristic and what training saw."""
    trace = Trace.of(name, backfill, a)
    table = ingest_trace(name, a.cache)
    opts = TrainOptions(backfill=backfill, window_size=a.window_size, warm=trace.warm,
                        procs=TRACES[name].procs, force=True, seed=a.seed)
    heuristic = prior_for(trace.workload, trace.machine, opts)
    if heuristic is None:
        raise SystemExit(f"{name}: the validation part holds no window of {a.window_size} jobs")
    cfg = InspectorConfig(heuristic=heuristic, backfill=backfill, k=a.k,
                          windows=a.train_windows, window_size=a.train_window_size,
                          warm=trace.warm, seed=a.seed, dagger_rounds=a.dagger_rounds,
                          min_gain=a.min_gain)
    policy = a.runs / f"{name}-{backfill}-s{a.seed}" / "policy"
    _, seen = train_inspector(trace.workload, trace.machine, cfg, policy,
                              training_data={"path": str(table), "sha256": file_sha256(table)})
    card = build_card(table, policy, opts, loaded=(trace.workload, trace.machine))
    write_card(policy, card)
    return trace, policy, heuristic, seen


def cell(name: str, backfill: str, a: argparse.Namespace) -> Cell:
    """Train, card and measure one trace x backfilling."""
    began = time.perf_counter()
    trace, policy, heuristic, seen = train_cell(name, backfill, a)
    train_s = time.perf_counter() - began
    card = json.loads((policy / "card.json").read_text(encoding="utf-8"))
    guard = active_guard(str(policy))
    began = time.perf_counter()
    scores = trace.scores({**dict.fromkeys(RANKERS), "inspector": InspectorPolicy(policy)},
                          trace.starts("test", a.windows, 1))
    inspector, base = scores["inspector"], scores[heuristic]
    deployed = base if guard is not None else inspector
    hindsight = [min(scores[h][i] for h in RANKERS) for i in range(len(base))]
    gap = float(np.mean(base) - np.mean(hindsight))
    return {"trace": name, "backfill": backfill, "heuristic": heuristic,
            "test_windows": len(base), "window_size": a.window_size,
            "teachers": [w["teacher"] for w in seen["windows"]], "min_gain": a.min_gain,
            "accept_share": seen["accept_share"], "decisions": seen["decisions"],
            "train_s": train_s, "test_s": time.perf_counter() - began,
            "guard": guard, "validation_decision": card["validation"]["decision"]
            if card.get("validation") else None,
            "mean_bsld": {"heuristic": float(np.mean(base)),
                          "inspector": float(np.mean(inspector)),
                          "deployed": float(np.mean(deployed)),
                          "hindsight": float(np.mean(hindsight)),
                          "test_best": min(float(np.mean(scores[h])) for h in RANKERS)},
            "inspector_vs_heuristic": paired(inspector, base),
            "deployed_vs_heuristic": paired(deployed, base),
            "hindsight_share": None if gap <= 0 else
            float(np.mean(base) - np.mean(deployed)) / gap,
            "per_window": {"heuristic": base, "inspector": inspector, "hindsight": hindsight}}


def line(c: Cell) -> str:
    """One printed line per cell."""
    m, d = c["mean_bsld"], c["inspector_vs_heuristic"]
    ci = d["relative_interval95"]
    shown = "n/a" if ci is None else f"[{ci[0]:+.1%}, {ci[1]:+.1%}]"
    return (f"{c['trace']} {c['backfill']}: {c['heuristic']} {m['heuristic']:.2f}, inspector "
            f"{m['inspector']:.2f} ({d['relative']:+.1%}, 95 % {shown}), deployed "
            f"{m['deployed']:.2f} (guard {'active' if c['guard'] else 'off'}), hindsight "
            f"{m['hindsight']:.2f}; train {c['train_s']:.0f} s")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_cell_options(p, "inspector")
    p.add_argument("--train-windows", type=int, default=16)
    p.add_argument("--train-window-size", type=int, default=256)
    p.add_argument("--k", type=int, default=8, help="proposals per decision")
    p.add_argument("--dagger-rounds", type=int, default=1)
    p.add_argument("--min-gain", type=float, default=0.0,
                   help="a window's best heuristic teaches only if this share better")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--runs", type=Path, default=ROOT / "runs" / "inspector")
    each_cell(p.parse_args(argv), cell, line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
