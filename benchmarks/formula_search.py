"""Does a scheduling formula tuned on a site's own log beat the heuristics on its next months?
(issue 27, "never worse than the best heuristic" and "at least 10 % better").

The SC17 functions F1-F4 (:mod:`hpcpolicy.policies.heuristics`) were fitted once, on other
machines. This benchmark fits a formula of the same shape to each trace instead, and asks
whether the validation months can tell which fitted formula will hold up on the test months.
The family is

    score = r^alpha * n^beta + gamma * s        (lower starts first)

with ``r`` the requested walltime (s, at least 1), ``n`` the processors and ``s`` the submit
time (s since the log's origin): a size term, and an age term that lets the jobs that have
waited longest move up (gamma > 0) or fall back (gamma < 0; LCFS is the limit). It holds
FCFS, LCFS, SJF, smallest-first and size-with-aging orders. For each trace x backfilling x
search seed:

1. ``--candidates`` random (alpha, beta, gamma) replay ``--train-windows`` random windows of
   the training part (the first 60 %, where ``hpcpolicy train`` learns);
2. the ``--top`` best of them and every registered heuristic replay the card's validation
   windows (60-70 %), and the lowest mean bsld there is *picked*: a fitted formula only when
   it beats every heuristic on those months;
3. everything replays ``--windows`` windows of the test part (70-100 %, window seed 1, as
   ``generalisation.py`` scores).

It reports the pick's regret against the test months' best heuristic (its mean bsld over the
best heuristic's, minus one; mean over search seeds), the regret of the validation months'
best heuristic (the guard's fallback rule), and the *hindsight* regret of the best of the
``--top`` formulas on the test months, which no rule could have known: whether good formulas
exist, against whether the months before could find them.

Writes JSON (default ``benchmarks/results/formula_search.json``) and prints one line per cell
and a summary line.

Usage:
    python -m benchmarks.formula_search [--traces CTC-SP2,HPC2N,KTH-SP2,RICC]
        [--backfills easy,none] [--seeds 1,2,3] [--candidates 400] [--top 10]
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from benchmarks._common import FIT_FRAC
from benchmarks.generalisation import Trace, add_cell_options, each_cell
from hpcpolicy.atomic import write_json
from hpcpolicy.policies.base import ScoreKernel
from hpcpolicy.policies.heuristics import HEURISTICS

if TYPE_CHECKING:
    from hpcpolicy.cluster import ClusterSpec
    from hpcpolicy.policies.base import Policy
    from hpcpolicy.sim.types import SimConfig
    from hpcpolicy.workload import Workload


@dataclass(frozen=True)
class Formula:
    """``r^alpha * n^beta + gamma * s``, a static score the compiled engine runs."""

    alpha: float
    beta: float
    gamma: float

    @property
    def name(self) -> str:
        return f"r^{self.alpha:.3g}*n^{self.beta:.3g}{self.gamma:+.3g}*s"

    def bind(self, workload: Workload, cluster: ClusterSpec, cfg: SimConfig) -> ScoreKernel:
        r = np.maximum(workload.req_walltime, 1).astype(np.float64)
        n = workload.procs.astype(np.float64)
        a = r ** self.alpha * n ** self.beta + self.gamma * workload.submit.astype(np.float64)
        return ScoreKernel("static", a, np.asarray(workload.submit, dtype=np.int64),
                           np.asarray(workload.user, dtype=np.int64), name=self.name)


def random_formulas(count: int, seed: int) -> list[Formula]:
    """``count`` formulas: exponents uniform in [0, 1.5]; |gamma| log-uniform in [1e-4, 1e6]
    per second, negative for 30 % of them."""
    rng = np.random.default_rng(seed)
    return [Formula(round(float(rng.uniform(0.0, 1.5)), 3), round(float(rng.uniform(0.0, 1.5)), 3),
                    float(f"{np.exp(rng.uniform(np.log(1e-4), np.log(1e6))) * sign:.3g}"))
            for sign in rng.choice([1.0, -1.0], p=[0.7, 0.3], size=count)]


def _means(scores: dict[str, list[float]]) -> dict[str, float]:
    return {name: float(np.mean(v)) for name, v in scores.items()}


def cell(name: str, backfill: str, a: argparse.Namespace) -> dict[str, Any]:
    """One trace x backfilling, every search seed."""
    trace = Trace.of(name, backfill, a)
    heuristics: dict[str, Policy | None] = dict.fromkeys(HEURISTICS)
    val_starts, test_starts = trace.validation(), trace.starts("test", a.windows, 1)
    test_heuristics = _means(trace.scores(heuristics, test_starts))
    val_heuristics = _means(trace.scores(heuristics, val_starts))
    best_test = min(test_heuristics.values())
    runs = []
    for seed in a.seeds:
        formulas: dict[str, Policy | None] = {
            f.name: f for f in random_formulas(a.candidates, seed)}
        fit = _means(trace.scores(formulas, trace.starts("train", a.train_windows, seed,
                                                        train_frac=FIT_FRAC)))
        top = {f: formulas[f] for f in sorted(fit, key=fit.__getitem__)[:a.top]}
        val = {**val_heuristics, **_means(trace.scores(top, val_starts))}
        test = {**test_heuristics, **_means(trace.scores(top, test_starts))}
        pick = min(val, key=val.__getitem__)
        runs.append({"seed": seed, "fit_best": {f: fit[f] for f in top},
                     "validation": val, "test": test, "pick": pick,
                     "regret": test[pick] / best_test - 1.0,
                     "hindsight": min(test[f] for f in top) / best_test - 1.0})
    fallback = min(val_heuristics, key=val_heuristics.__getitem__)
    return {"trace": name, "backfill": backfill, "warm": trace.warm,
            "best_heuristic_on_test": min(test_heuristics, key=test_heuristics.__getitem__),
            "fallback": fallback, "fallback_regret": test_heuristics[fallback] / best_test - 1,
            "searches": runs,
            "picked_a_formula": sum(r["pick"] not in HEURISTICS for r in runs),
            "regret": float(np.mean([r["regret"] for r in runs])),
            "hindsight": float(np.mean([r["hindsight"] for r in runs]))}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_cell_options(p, "formula_search")
    p.add_argument("--seeds", type=lambda s: [int(x) for x in s.split(",")], default=[1, 2, 3],
                   help="search seeds (candidates and training windows)")
    p.add_argument("--candidates", type=int, default=400)
    p.add_argument("--top", type=int, default=10, help="formulas taken on to validation")
    p.add_argument("--train-windows", type=int, default=30)
    a = p.parse_args(argv)
    cells = each_cell(a, cell, lambda c: (
        f"formula_search {c['trace']} {c['backfill']}: picked {c['picked_a_formula']}/"
        f"{len(a.seeds)} times a formula; regret {c['regret']:+.1%} (the guard's fallback "
        f"{c['fallback']} {c['fallback_regret']:+.1%}); best fitted formula in hindsight "
        f"{c['hindsight']:+.1%}"))
    summary = {"never_worse": sum(c["regret"] <= 0.0 for c in cells),
               "ten_percent_better": sum(c["regret"] <= -0.10 for c in cells),
               "fallback_never_worse": sum(c["fallback_regret"] <= 0.0 for c in cells),
               "hindsight_ten_percent_better": sum(c["hindsight"] <= -0.10 for c in cells),
               "cells": len(cells)}
    write_json(a.out, {"argv": sys.argv[1:], "cells": cells, "summary": summary})
    print(f"formula_search: the pick is never worse than the best heuristic in "
          f"{summary['never_worse']}/{len(cells)} cells (the fallback alone: "
          f"{summary['fallback_never_worse']}), >= 10 % better in "
          f"{summary['ten_percent_better']}; in hindsight a fitted formula is >= 10 % better "
          f"in {summary['hindsight_ten_percent_better']} -> {a.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
