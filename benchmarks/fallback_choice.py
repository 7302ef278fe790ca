"""Which heuristic should a policy's guard fall back to? Rules that choose it before the test
months, scored on the test months (issue 27: "the deployed policy is never worse than the best
heuristic").

When a trained policy does not beat the heuristics on the validation part, its guard runs a
heuristic in its place (:mod:`hpcpolicy.card`), chosen there and then, before the months it
will run on. Whatever the policy, the deployed score is then that heuristic's, so this part of
the bar needs no training to measure: the guard's choice holds only as far as the best
heuristic before the test part is still the best in it.

For each shared trace with requested times (those of ``generalisation.py``, with its machine
options) x backfilling, every registered heuristic replays

* ``tail``: the 20 side-by-side windows that end where the validation part starts (the last
  training jobs, 50-60 % of the log);
* ``val``: the 20 side-by-side windows the card's guard decides on (60-70 %);
* ``test``: ``--windows`` random windows of the test part (70-100 %) for each of ``--seeds``.

Then each rule picks a fallback from what it may see, and its *regret* is its heuristic's
mean bsld on the test windows over the best heuristic's there, minus one (0: it chose the best;
mean over the test seeds). The rules:

* ``val``: lowest mean bsld on ``val`` (the card's rule);
* ``tail+val``: lowest mean over both periods (twice the history);
* ``rank``: lowest mean rank across the ``val`` windows (no window dominates the mean);
* ``geomean``: lowest geometric mean over both periods (the same, on a log scale);
* ``deployable``: ``val``'s rule among the heuristics a site would run, leaving out the ones
  that can starve a job while others keep arriving (lcfs, ljf, smallest, largest).

Writes JSON (default ``benchmarks/results/fallback_choice.json``) and prints one line per
rule.

Usage:
    python benchmarks/fallback_choice.py [--traces CTC-SP2,HPC2N,KTH-SP2,RICC]
        [--backfills easy,none] [--windows 20] [--seeds 1,2,3]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
from generalisation import MACHINES, TRACES, table_of  # noqa: E402

from hpcpolicy.atomic import write_json  # noqa: E402
from hpcpolicy.card import VALIDATION_WINDOWS  # noqa: E402
from hpcpolicy.env.factory import load  # noqa: E402
from hpcpolicy.env.split import validation_starts  # noqa: E402
from hpcpolicy.evaluate import EvaluateConfig, evaluate  # noqa: E402
from hpcpolicy.policies.heuristics import HEURISTICS  # noqa: E402

TRAIN_FRAC, VAL_FRAC = 0.7, 0.1
"""``hpcpolicy train``'s defaults: the guard's validation part is 60-70 % of the log."""
STARVING = ("lcfs", "ljf", "smallest", "largest")
"""Heuristics under which a job can wait for ever while others keep arriving."""
Windows = dict[str, list[float]]
"""Per heuristic, the mean bsld of each window."""


def _per_window(workload: Any, machine: Any, backfill: str, warm: bool,
                **windows: Any) -> Windows:
    cfg = EvaluateConfig(policies=tuple(HEURISTICS), backfills=(backfill,), warm=warm,
                         **windows)
    ev = evaluate(workload, machine, cfg)
    return {run.config.policy: [float(w.summary["mean_bsld"]) for w in run.windows]
            for run in ev.runs}


def _lowest(score: Callable[[str], float], names: tuple[str, ...] = tuple(HEURISTICS)) -> str:
    return min(names, key=lambda name: (score(name), names.index(name)))


def choose(tail: Windows, val: Windows) -> dict[str, str]:
    """The fallback each rule picks from the periods before the test part."""
    names = tuple(val)
    ranks = np.argsort(np.argsort([val[n] for n in names], axis=0), axis=0).mean(axis=1)
    return {
        "val": _lowest(lambda n: float(np.mean(val[n]))),
        "tail+val": _lowest(lambda n: float(np.mean(tail[n] + val[n]))),
        "rank": _lowest(lambda n: float(ranks[names.index(n)])),
        "geomean": _lowest(lambda n: float(np.mean(np.log(tail[n] + val[n])))),
        "deployable": _lowest(lambda n: float(np.mean(val[n])),
                              tuple(n for n in names if n not in STARVING)),
    }


def cell(name: str, backfill: str, a: argparse.Namespace) -> dict[str, Any]:
    """One trace x backfilling: every rule's pick and its regret on each test seed."""
    opts = MACHINES.get(name, {})
    warm = bool(opts.get("warm", False))
    workload, machine = load(table_of(name, a.cache), None, None, opts.get("procs"))
    n = len(workload)
    starts = {part: validation_starts(n, frac, VAL_FRAC, size=a.window_size,
                                      count=VALIDATION_WINDOWS)
              for part, frac in (("tail", TRAIN_FRAC - VAL_FRAC), ("val", TRAIN_FRAC))}
    seen = {part: _per_window(workload, machine, backfill, warm, starts=s, split="all",
                              window_size=a.window_size) for part, s in starts.items()}
    picks = choose(seen["tail"], seen["val"])
    tests = []
    for seed in a.seeds:
        test = _per_window(workload, machine, backfill, warm, windows=a.windows, seed=seed,
                           window_size=a.window_size)
        means = {h: float(np.mean(v)) for h, v in test.items()}
        best = _lowest(means.__getitem__)
        tests.append({"seed": seed, "means": means, "best": best,
                      "regret": {r: means[h] / means[best] - 1.0 for r, h in picks.items()}})
    return {"trace": name, "backfill": backfill, "warm": warm,
            "before_test": {part: {h: float(np.mean(v)) for h, v in w.items()}
                            for part, w in seen.items()},
            "picks": picks, "tests": tests,
            "regret": {r: float(np.mean([t["regret"][r] for t in tests])) for r in picks}}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--traces", default=",".join(TRACES))
    p.add_argument("--backfills", default="easy,none")
    p.add_argument("--windows", type=int, default=20, help="test windows per seed")
    p.add_argument("--window-size", type=int, default=1024)
    p.add_argument("--seeds", type=lambda s: [int(x) for x in s.split(",")], default=[1, 2, 3])
    p.add_argument("--cache", type=Path,
                   default=Path(tempfile.gettempdir()) / "hpcpolicy-generalisation")
    p.add_argument("--out", type=Path,
                   default=ROOT / "benchmarks" / "results" / "fallback_choice.json")
    a = p.parse_args(argv)
    unknown = sorted(set(a.traces.split(",")) - set(TRACES))
    if unknown:
        raise SystemExit(f"--traces {','.join(unknown)}: not one of {', '.join(TRACES)}")
    cells = [cell(name, backfill, a) for backfill in a.backfills.split(",")
             for name in a.traces.split(",")]
    rules = list(cells[0]["regret"])
    summary = {r: {"best_chosen": sum(c["regret"][r] <= 0.0 for c in cells),
                   "mean_regret": float(np.mean([c["regret"][r] for c in cells])),
                   "worst_regret": max(c["regret"][r] for c in cells)} for r in rules}
    write_json(a.out, {"argv": sys.argv[1:], "cells": cells, "summary": summary})
    for r, s in summary.items():
        print(f"fallback_choice {r}: the test months' best heuristic in {s['best_chosen']}/"
              f"{len(cells)} cells; regret mean {s['mean_regret']:+.1%}, worst "
              f"{s['worst_regret']:+.1%} -> {a.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
