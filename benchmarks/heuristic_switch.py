"""Can a policy that switches between heuristics as the queue changes, fitted on a site's
log, beat the best heuristic on its next months? (issue 27)

``fallback_choice.py`` bounds what choosing one heuristic per test window can gain: with
hindsight, 5-26 % over the best single heuristic. This benchmark tries to earn part of that
gain without hindsight. At every decision the policy reads four numbers of the state

    x = (1, log(1 + queue length) / log(1 + 4096), free cores / all cores,
         log(1 + median wait of the queue) / log(1 + 10 days))

and runs the order of heuristic ``argmax_h W[h] . x`` (the chosen heuristic's whole order:
its first job becomes the head, and backfilling follows its order). ``W`` (8 heuristics x 4)
is fitted by the cross-entropy method on ``--fit-windows`` random windows of the training
part (the first 60 %, where ``hpcpolicy train`` learns), starting from the best heuristic
there. Then, as the card does for a trained policy:

* the switch and every heuristic replay the card's 20 validation windows (60-70 %), and the
  switch is deployed only where it beats the best heuristic there with 95 % confidence
  (:func:`hpcpolicy.deploy.improvement.decide`), else that heuristic runs;
* everything replays the protocol's ``--windows`` test windows (70-100 %, window seed 1).

Reported per trace x backfilling: the switch's score on its fit windows against the best
heuristic there, on validation, the guard's decision, and its regret and the deployed
regret against the best heuristic on the test windows.

Usage:
    python -m benchmarks.heuristic_switch [--traces ...] [--backfills easy,none]
        [--iterations 8] [--population 14]
"""

from __future__ import annotations

import argparse
import math
import sys
from typing import TYPE_CHECKING, Any

import numpy as np

from benchmarks._common import FIT_FRAC
from benchmarks.generalisation import Trace, add_cell_options, each_cell
from hpcpolicy.atomic import write_json
from hpcpolicy.deploy.improvement import decide
from hpcpolicy.policies.heuristics import HEURISTICS, get_policy

if TYPE_CHECKING:
    from hpcpolicy.cluster import ClusterSpec
    from hpcpolicy.policies.base import Policy, QueueView, ScoreKernel
    from hpcpolicy.sim.types import SimConfig
    from hpcpolicy.workload import Workload

ORDERS = ("fcfs", "lcfs", "sjf", "smallest", "f1", "f2", "f3", "f4")
"""The heuristics the switch chooses among (those whose order needs no engine state)."""
FEATURES = 4
QUEUE_SCALE, WAIT_SCALE = math.log1p(4096), math.log1p(10 * 86_400)


class Switch:
    """Runs, at each decision, the order of the heuristic its weights ``w`` favour now."""

    def __init__(self, w: np.ndarray, name: str) -> None:
        self.w, self.name = w.reshape(len(ORDERS), FEATURES), name

    def bind(self, workload: Workload, cluster: ClusterSpec, cfg: SimConfig) -> SwitchScorer:
        return SwitchScorer(self.w, [get_policy(h).bind(workload, cluster, cfg)
                                     for h in ORDERS])


class SwitchScorer:
    def __init__(self, w: np.ndarray, kernels: list[ScoreKernel]) -> None:
        self.w, self.kernels = w, kernels

    def scores(self, view: QueueView) -> np.ndarray:
        wait = view.now - view.workload.submit[view.jobs]
        x = np.array([1.0, math.log1p(len(view.jobs)) / QUEUE_SCALE,
                      view.free[:, 0].sum() / view.capacity[:, 0].sum(),
                      math.log1p(float(np.median(wait))) / WAIT_SCALE])
        return self.kernels[int(np.argmax(self.w @ x))].at(view.now, view.jobs)


def fit(sets: list[tuple[Trace, tuple[int, ...]]], a: argparse.Namespace
        ) -> tuple[np.ndarray, str, float]:
    """Weights fitted by the cross-entropy method on the windows of ``sets`` (a trace and
    window starts each), the heuristic they start from, and the fitted switch's score against
    it. A score is the mean over sets of the mean bsld over the best of :data:`ORDERS`' there,
    so that no trace outweighs another."""
    base = [{h: float(np.mean(v)) for h, v in trace.scores(dict.fromkeys(ORDERS), starts).items()}
            for trace, starts in sets]
    floors = [min(b.values()) for b in base]
    ratios = {h: float(np.mean([b[h] / floors[k] for k, b in enumerate(base)])) for h in ORDERS}
    start = min(ORDERS, key=ratios.__getitem__)
    rng = np.random.default_rng(a.seed)
    mean = np.zeros(len(ORDERS) * FEATURES)
    mean[ORDERS.index(start) * FEATURES] = 1.0  # the bias term: the best heuristic, always
    std = np.ones_like(mean)
    best_score, best_w = ratios[start], mean.copy()
    for _ in range(a.iterations):
        population = [mean + std * rng.standard_normal(mean.size) for _ in range(a.population)]
        switches = {f"w{i}": Switch(w, f"w{i}") for i, w in enumerate(population)}
        per_set = [trace.scores(switches, starts) for trace, starts in sets]
        scores = np.array([np.mean([np.mean(p[f"w{i}"]) / floors[k]
                                    for k, p in enumerate(per_set)])
                           for i in range(len(population))])
        elite = np.argsort(scores)[:a.elite]
        mean = np.mean([population[i] for i in elite], axis=0)
        std = np.std([population[i] for i in elite], axis=0) + 0.1
        if scores[elite[0]] < best_score:
            best_score, best_w = float(scores[elite[0]]), population[elite[0]]
    return best_w, start, best_score / ratios[start] - 1.0


def cell(name: str, backfill: str, a: argparse.Namespace) -> dict[str, Any]:
    trace = Trace.of(name, backfill, a)
    fit_on = [name] if a.fit_on == "same" else [t for t in a.traces.split(",") if t != name]
    sets = [(t, t.starts("train", a.fit_windows, a.seed, train_frac=FIT_FRAC))
            for t in (trace if other == name else Trace.of(other, backfill, a)
                      for other in fit_on)]
    weights, start, fit_gain = fit(sets, a)
    switch: dict[str, Policy | None] = {**dict.fromkeys(HEURISTICS),
                                        "switch": Switch(weights, "switch")}
    val = trace.scores(switch, trace.validation())
    fallback = min(HEURISTICS, key=lambda h: float(np.mean(val[h])))
    deploy = bool(decide(val["switch"], val[fallback])["deploy"])
    test = {p: float(np.mean(v))
            for p, v in trace.scores(switch, trace.starts("test", a.windows, 1)).items()}
    best = min(HEURISTICS, key=test.__getitem__)
    return {"trace": name, "backfill": backfill, "fit_on": fit_on,
            "weights": [float(v) for v in weights],
            "fit": {"start": start, "versus_start": fit_gain},
            "validation": {"switch": float(np.mean(val["switch"])), "fallback": fallback,
                           "fallback_bsld": float(np.mean(val[fallback])), "deploy": deploy},
            "test": test, "best_heuristic": best,
            "regret": test["switch"] / test[best] - 1.0,
            "deployed_regret": test["switch" if deploy else fallback] / test[best] - 1.0}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_cell_options(p, "heuristic_switch")
    p.add_argument("--fit-windows", type=int, default=16)
    p.add_argument("--iterations", type=int, default=8, help="cross-entropy iterations")
    p.add_argument("--population", type=int, default=14)
    p.add_argument("--elite", type=int, default=4)
    p.add_argument("--seed", type=int, default=3, help="fit windows and search")
    p.add_argument("--fit-on", choices=("same", "others"), default="same",
                   help="fit on the trace's own training part, or on the other --traces' "
                        "(what a switch fitted elsewhere does at a new site)")
    a = p.parse_args(argv)
    cells = each_cell(a, cell, lambda c: (
        f"heuristic_switch {c['trace']} {c['backfill']}: fitted on {','.join(c['fit_on'])}, "
        f"{c['fit']['versus_start']:+.1%} against {c['fit']['start']} there; validation "
        f"{c['validation']['switch']:.2f} against {c['validation']['fallback']} "
        f"{c['validation']['fallback_bsld']:.2f} (deployed: {c['validation']['deploy']}); "
        f"test {c['regret']:+.1%} against {c['best_heuristic']}, deployed "
        f"{c['deployed_regret']:+.1%}"))
    summary = {"better_on_fit": sum(c["fit"]["versus_start"] < 0.0 for c in cells),
               "deployed": sum(c["validation"]["deploy"] for c in cells),
               "never_worse": sum(c["regret"] <= 0.0 for c in cells),
               "ten_percent_better": sum(c["regret"] <= -0.10 for c in cells),
               "deployed_never_worse": sum(c["deployed_regret"] <= 0.0 for c in cells),
               "cells": len(cells)}
    write_json(a.out, {"argv": sys.argv[1:], "cells": cells, "summary": summary})
    print(f"heuristic_switch: better than the best heuristic on its fit windows in "
          f"{summary['better_on_fit']}/{len(cells)} cells, on the test windows in "
          f"{summary['never_worse']} (>= 10 %: {summary['ten_percent_better']}); the guard "
          f"deployed it in {summary['deployed']} -> {a.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
