"""Policies and heuristics side by side on the parts of the log a run did not train on.

Training ends with three decisions taken on the *validation* part (the last ``val_frac`` of the
jobs before the test part, which no episode used: :func:`hpcpolicy.world.split.
validation_starts`): the heuristic ``--prior auto`` starts from (:mod:`.prior`), the snapshot
that is deployed (:mod:`.snapshots`) and the guard's fallback (:mod:`.card`). Each replays
windows there through :func:`hpcpolicy.evaluate.evaluate` under the run's backfilling and
episode options (:func:`compare`). A quiet validation part, where every heuristic scores alike
(:func:`heuristics_too_close`), does not tell them apart: the choice then falls to the jobs
just before it (:func:`earlier_fallback`).

Example:
    >>> fallback_of({"best_heuristic": {"policy": "sjf"}})
    'sjf'
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from hpcpolicy.errors import ConfigError

if TYPE_CHECKING:
    from pathlib import Path

    from hpcpolicy.cluster import ClusterSpec
    from hpcpolicy.evaluate import Evaluation
    from hpcpolicy.training.options import TrainOptions
    from hpcpolicy.workload import Workload

__all__ = ["SEPARATION", "VALIDATION_WINDOWS", "Step", "compare", "earlier_fallback",
           "fallback_of", "heuristics_on", "heuristics_too_close", "load_table", "record"]

Step = Callable[[str, int, int], None]
"""Progress of a comparison: ``step(label, done, total)``."""
VALIDATION_WINDOWS = 20
"""At most this many side-by-side windows of the validation part decide the guard."""
SEPARATION = 0.05
"""The validation part tells the heuristics apart when the worst one's mean bsld there is at
least this share above the best one's. A quiet period (RICC's 60-70 %: every heuristic between
1.01 and 1.03) does not, and the heuristic that is best there is then little more than a guess
for the months after (``benchmarks/fallback_choice.py``): the guard's fallback is then chosen
on the jobs before it."""


def load_table(table: Path, opts: TrainOptions) -> tuple[Workload, ClusterSpec]:
    """The workload and machine ``opts`` trained on."""
    from hpcpolicy.env.factory import load

    return load(table, opts.workload().to_dict(),
                None if opts.cluster is None else str(opts.cluster), opts.procs)


def compare(workload: Workload, machine: ClusterSpec, policies: tuple[str, ...],
            opts: TrainOptions, windows: dict[str, Any], on_step: Step | None) -> Evaluation:
    """``policies`` on the same windows under the training run's backfilling and episode
    options (``windows``: :class:`~hpcpolicy.evaluate.EvaluateConfig` fields choosing them)."""
    from hpcpolicy.compat import compat_preset
    from hpcpolicy.evaluate import EvaluateConfig, evaluate

    cfg = EvaluateConfig(policies=policies, backfills=(opts.backfill,), deployed=False,
                         window_size=opts.window_size, train_frac=opts.train_frac,
                         warm=opts.warm, compat=opts.compat,
                         exclusive_nodes=compat_preset(opts.compat).exclusive_nodes, **windows)
    return evaluate(workload, machine, cfg, on_step=on_step)


def _scores(ev: Evaluation) -> list[dict[str, Any]]:
    scores = []
    for run in ev.runs:
        spread = ev.spread(run)["mean_bsld"]
        scores.append({"policy": run.config.policy,
                       "kind": "learned" if run.config.policy in ev.learned else "heuristic",
                       "mean_bsld": run.summary["mean_bsld"], **spread})
    return scores


def record(ev: Evaluation, opts: TrainOptions) -> dict[str, Any]:
    """A comparison's windows, every run's score and the best heuristic, as the card keeps
    them."""
    best, best_bsld = ev.best_heuristics()[opts.backfill]
    return {"starts": list(ev.starts), "scores": _scores(ev),
            "best_heuristic": {"policy": best, "mean_bsld": best_bsld}}


def heuristics_on(workload: Workload, machine: ClusterSpec, opts: TrainOptions,
                  starts: tuple[int, ...], on_step: Step | None,
                  policy: Path | None = None) -> tuple[Evaluation, dict[str, Any]]:
    """Every heuristic (and ``policy``, last) on the windows at ``starts``: the evaluation and
    its ``starts``/``scores``/``best_heuristic`` record."""
    from hpcpolicy.policies.heuristics import HEURISTICS

    names = (*HEURISTICS, *(() if policy is None else (str(policy),)))
    ev = compare(workload, machine, names, opts, {"starts": starts, "split": "all"}, on_step)
    return ev, record(ev, opts)


def earlier_fallback(workload: Workload, machine: ClusterSpec, opts: TrainOptions,
                     validation: dict[str, Any], on_step: Step | None) -> dict[str, Any] | None:
    """Where the heuristics on the validation part (``validation``: their record) lie too close
    to choose among (:func:`heuristics_too_close`), their record on the ``val_frac`` of jobs
    just before it (the last training jobs), when that part tells them apart; else None (or
    when it holds no window)."""
    from hpcpolicy.world.split import fit_frac, validation_range, validation_starts

    if not heuristics_too_close(validation):
        return None
    end = fit_frac(opts.train_frac, opts.val_frac)  # where the validation part begins
    try:
        starts = validation_starts(len(workload), end, opts.val_frac, size=opts.window_size,
                                   count=VALIDATION_WINDOWS)
    except ConfigError:
        return None
    _, earlier = heuristics_on(workload, machine, opts, starts, on_step)
    if heuristics_too_close(earlier):
        return None
    return {"jobs": list(validation_range(len(workload), end, opts.val_frac)), **earlier}


def fallback_of(validation: dict[str, Any]) -> str:
    """The guard's fallback heuristic recorded in the card's ``validation``."""
    chosen: str = validation.get("fallback_chosen_on", validation)["best_heuristic"]["policy"]
    return chosen


def heuristics_too_close(validation: dict[str, Any]) -> str | None:
    """A warning when the heuristics' mean bsld on the validation part lie within
    :data:`SEPARATION` of each other (``validation``: the card's ``validation``), else None.

    Example:
        >>> scores = [{"policy": p, "kind": "heuristic", "mean_bsld": b}
        ...           for p, b in (("fcfs", 1.03), ("f1", 1.01))]
        >>> heuristics_too_close({"scores": scores}).split(" on the")[0]
        'the heuristics score within 5% of each other'
        >>> scores[0]["mean_bsld"] = 1.07
        >>> heuristics_too_close({"scores": scores}) is None
        True
    """
    means = [s["mean_bsld"] for s in validation["scores"] if s["kind"] == "heuristic"]
    low, high = min(means), max(means)
    if high >= (1.0 + SEPARATION) * low:
        return None
    return (f"the heuristics score within {SEPARATION:.0%} of each other on the validation part "
            f"(mean bsld {low:.2f} to {high:.2f}), so it says little about which will be best "
            "later")
