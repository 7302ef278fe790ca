"""``--prior auto``: the heuristic an online run starts from, chosen before training as the
guard chooses its fallback (:mod:`hpcpolicy.training.validation`), and the refusal to train
where the heuristics tie and there is nothing to learn."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hpcpolicy.errors import ConfigError
from hpcpolicy.training.validation import (
    SEPARATION,
    VALIDATION_WINDOWS,
    Step,
    earlier_fallback,
    heuristics_on,
    heuristics_too_close,
)

if TYPE_CHECKING:
    from hpcpolicy.cluster import ClusterSpec
    from hpcpolicy.training.options import TrainOptions
    from hpcpolicy.workload import Workload

__all__ = ["cannot_learn", "prior_for"]


def prior_for(workload: Workload, machine: ClusterSpec, opts: TrainOptions,
              on_step: Step | None = None) -> str | None:
    """The heuristic ``--prior auto`` starts from: the best on the validation part, or on the
    jobs before it when the validation part cannot tell the heuristics apart; only heuristics
    that can be a prior (:data:`hpcpolicy.env.prior.PRIORS`) compete. None when the validation
    part holds no window.

    Raises:
        ConfigError: Neither part tells the heuristics apart, so training there has nothing to
            learn (:func:`cannot_learn` says why and what to change); not with ``opts.force``.
    """
    from hpcpolicy.env.prior import PRIORS
    from hpcpolicy.world.split import validation_starts

    try:
        starts = validation_starts(len(workload), opts.train_frac, opts.val_frac,
                                   size=opts.window_size, count=VALIDATION_WINDOWS)
    except ConfigError:
        return None
    _, seen = heuristics_on(workload, machine, opts, starts, on_step)
    earlier = earlier_fallback(workload, machine, opts, seen, on_step)
    if not opts.force and earlier is None and heuristics_too_close(seen):
        raise ConfigError(cannot_learn(seen, opts, machine))
    chosen_on = earlier or seen
    best: str = min((s for s in chosen_on["scores"] if s["policy"] in PRIORS),
                    key=lambda s: s["mean_bsld"])["policy"]
    return best


def cannot_learn(validation: dict[str, Any], opts: TrainOptions, machine: ClusterSpec) -> str:
    """Why a run on a part where the heuristics tie (``validation``: their record) has nothing
    to learn, and what to change."""
    means = [s["mean_bsld"] for s in validation["scores"] if s["kind"] == "heuristic"]
    low, high = min(means), max(means)
    why = ("no queue forms: every heuristic's mean bsld is 1.00, every job starts when "
           "submitted" if high <= 1.0 else
           f"their mean bsld lie within {SEPARATION:.0%} of each other ({low:.2f} to "
           f"{high:.2f}), below the noise between windows")
    return (f"the heuristics tie on the validation part and on the jobs before it ({why}), so "
            "there is nothing to learn; give longer windows (--window-size, now "
            f"{opts.window_size:,} jobs), more load (a smaller machine: --procs or --cluster, "
            f"now {machine.total_cores:,} cores), or another period of the log (a busier one); "
            "--force trains anyway")
