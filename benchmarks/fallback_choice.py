"""Which heuristic should a policy's guard fall back to? Rules that choose it before the test
months, scored on the test months (issue 27: "the deployed policy is never worse than the best
heuristic").

When a trained policy does not beat the heuristics on the validation part, its guard runs a
heuristic in its place (:mod:`hpcpolicy.training.card`), chosen there and then, before
the months it will run on. Whatever the policy, the deployed score is then that heuristic's,
so this part of the bar needs no training to measure: the guard's choice holds only as far as
the best heuristic before the test part is still the best in it.

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
  that can starve a job while others keep arriving (lcfs, ljf, smallest, largest);
* ``recent-L`` (``--recent``): for each test window on its own, the best heuristic on the
  ``L`` jobs just before it, a fallback re-chosen as the months go by (what an admin could do
  by re-running the choice on the latest log before each period).

And one bound, not a rule: ``oracle`` takes, for each test window, the heuristic that turned
out best on that very window. No rule that picks heuristics can beat it, so its regret (how
much better than the best single heuristic it is) bounds what choosing among heuristics can
gain.

Writes JSON (default ``benchmarks/results/fallback_choice.json``) and prints one line per
rule.

Usage:
    python -m benchmarks.fallback_choice [--traces CTC-SP2,HPC2N,KTH-SP2,RICC]
        [--backfills easy,none] [--windows 20] [--seeds 1,2,3] [--recent 1024,4096]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np

from benchmarks._common import FIT_FRAC, TRAIN_FRAC
from benchmarks.generalisation import Trace, add_cell_options, cells_of
from hpcpolicy.atomic import write_json
from hpcpolicy.policies.heuristics import HEURISTICS

STARVING = ("lcfs", "ljf", "smallest", "largest")
"""Heuristics under which a job can wait for ever while others keep arriving."""
Windows = dict[str, list[float]]
"""Per heuristic, the mean bsld of each window."""


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


def per_window_picks(test: Windows, before: Windows) -> float:
    """Mean bsld on the test windows when each window runs the heuristic that was best on its
    own ``before`` window (same order of windows)."""
    names = tuple(test)
    picks = np.argmin([before[n] for n in names], axis=0)
    return float(np.mean([test[names[p]][w] for w, p in enumerate(picks)]))


def cell(name: str, backfill: str, a: argparse.Namespace) -> dict[str, Any]:
    """One trace x backfilling: every rule's pick and its regret on each test seed."""
    trace = Trace.of(name, backfill, a)
    heuristics = dict.fromkeys(HEURISTICS)
    seen = {part: trace.scores(heuristics, trace.validation(end))
            for part, end in (("tail", FIT_FRAC), ("val", TRAIN_FRAC))}
    picks = choose(seen["tail"], seen["val"])
    tests = []
    for seed in a.seeds:
        test_starts = trace.starts("test", a.windows, seed)
        test = trace.scores(heuristics, test_starts)
        means = {h: float(np.mean(v)) for h, v in test.items()}
        best = _lowest(means.__getitem__)
        regret = {r: means[h] / means[best] - 1.0 for r, h in picks.items()}
        for size in a.recent:
            before = replace(trace, size=size).scores(
                heuristics, tuple(s - size for s in test_starts))
            regret[f"recent-{size}"] = per_window_picks(test, before) / means[best] - 1.0
        tests.append({"seed": seed, "means": means, "best": best, "regret": regret,
                      "oracle": per_window_picks(test, test) / means[best] - 1.0})
    return {"trace": name, "backfill": backfill, "warm": trace.warm,
            "before_test": {part: {h: float(np.mean(v)) for h, v in w.items()}
                            for part, w in seen.items()},
            "picks": picks, "tests": tests,
            "regret": {r: float(np.mean([t["regret"][r] for t in tests]))
                       for r in tests[0]["regret"]},
            "oracle": float(np.mean([t["oracle"] for t in tests]))}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_cell_options(p, "fallback_choice")
    p.add_argument("--seeds", type=lambda s: [int(x) for x in s.split(",")], default=[1, 2, 3])
    p.add_argument("--recent", type=lambda s: [int(x) for x in s.split(",") if x],
                   default=[1024, 4096],
                   help="lengths L of the recent-L rules (jobs before each test window); '' "
                        "for none")
    a = p.parse_args(argv)
    cells = [cell(name, backfill, a) for name, backfill in cells_of(a)]
    rules = list(cells[0]["regret"])
    summary = {r: {"best_chosen": sum(c["regret"][r] <= 0.0 for c in cells),
                   "mean_regret": float(np.mean([c["regret"][r] for c in cells])),
                   "worst_regret": max(c["regret"][r] for c in cells)} for r in rules}
    oracle = [c["oracle"] for c in cells]
    summary["oracle"] = {"mean_regret": float(np.mean(oracle)), "worst_regret": max(oracle)}
    write_json(a.out, {"argv": sys.argv[1:], "cells": cells, "summary": summary})
    for r in rules:
        s = summary[r]
        print(f"fallback_choice {r}: the test months' best heuristic in {s['best_chosen']}/"
              f"{len(cells)} cells; regret mean {s['mean_regret']:+.1%}, worst "
              f"{s['worst_regret']:+.1%} -> {a.out}")
    bound = summary["oracle"]
    print(f"fallback_choice oracle (each test window's own best heuristic, a bound): "
          f"{bound['mean_regret']:+.1%} on average, {bound['worst_regret']:+.1%} in the cell "
          "where it gains least")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
