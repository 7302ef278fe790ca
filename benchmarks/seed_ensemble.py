"""Do the seeds of the generalisation protocol, voting together, do better than each alone?
(issue 27: "an ensemble or uncertainty check that falls back to the best heuristic where the
policy is unsure").

``generalisation.py`` trains one policy per trace x backfilling x seed. Policies trained with
``--prior`` (the default, :mod:`hpcpolicy.env.prior`) see the waiting jobs in the prior
heuristic's order and start as that heuristic. This benchmark runs, at every decision, each
seed's policy on the same queue and

* ``vote-all``: starts the job they all chose, or the prior's first job when they disagree
  (deviate from the heuristic only where every member is sure);
* ``vote-most``: starts the job most of them chose, or the prior's first job without a
  majority.

Each ensemble, its members and every heuristic replay the protocol's test windows
(``--windows`` windows of ``--window-size`` jobs from the last 30 %, window seed 1, as
``generalisation.py`` scores); the ensembles' own guard is not decided here, so the figures are
the policies' scores, not the deployed ones.

Usage:
    python -m benchmarks.seed_ensemble --runs runs/generalisation [--seeds 1,2,3]
        [--traces ...] [--backfills easy,none]
"""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from benchmarks.generalisation import Trace, add_cell_options, each_cell
from hpcpolicy.deploy.learned import LearnedPolicy, LearnedScorer
from hpcpolicy.env.driver import head_scores
from hpcpolicy.env.prior import prior_kernel, slot_order
from hpcpolicy.policies.heuristics import HEURISTICS

if TYPE_CHECKING:
    from hpcpolicy.cluster import ClusterSpec
    from hpcpolicy.policies.base import Policy, QueueView, ScoreKernel
    from hpcpolicy.sim.types import SimConfig
    from hpcpolicy.workload import Workload


class Vote:
    """Seeds' policies that share a prior, voting on the head job at each decision."""

    def __init__(self, members: list[LearnedPolicy], quorum: int, name: str) -> None:
        orders = {m.artifact.slot_order for m in members}
        if len(orders) != 1 or None in orders:
            raise SystemExit(f"{name}: the members must share one prior, not {orders}")
        self.members, self.quorum, self.name = members, quorum, name
        self.prior = orders.pop()

    def bind(self, workload: Workload, cluster: ClusterSpec, cfg: SimConfig) -> VoteScorer:
        kernel = prior_kernel(self.prior, workload, cluster, cfg)
        if kernel is None:
            raise SystemExit(f"{self.name}: the members' prior {self.prior!r} orders no slots")
        return VoteScorer([m.bind(workload, cluster, cfg) for m in self.members], self.quorum,
                          kernel)


class VoteScorer:
    def __init__(self, members: list[LearnedScorer], quorum: int, prior: ScoreKernel) -> None:
        self.members, self.quorum, self.prior = members, quorum, prior

    def scores(self, view: QueueView) -> np.ndarray:
        chosen = Counter(int(np.argmin(m.scores(view))) for m in self.members)
        job, votes = chosen.most_common(1)[0]
        order = slot_order(self.prior, view.now, view.jobs)
        slot = int(np.flatnonzero(order == job)[0]) if votes >= self.quorum else 0
        return head_scores(view.jobs.shape[0], slot, order=order)


def cell(name: str, backfill: str, a: argparse.Namespace) -> dict[str, Any]:
    trace = Trace.of(name, backfill, a)
    members = {f"seed {s}": LearnedPolicy(a.runs / f"{name}-{backfill}-s{s}" / "policy")
               for s in a.seeds}
    votes = {"vote-all": Vote(list(members.values()), len(members), "vote-all"),
             "vote-most": Vote(list(members.values()), len(members) // 2 + 1, "vote-most")}
    policies: dict[str, Policy | None] = {**dict.fromkeys(HEURISTICS), **members, **votes}
    means = {p: float(np.mean(v)) for p, v in trace.scores(
        policies, trace.starts("test", a.windows, 1)).items()}
    best = min(HEURISTICS, key=means.__getitem__)
    prior = votes["vote-all"].prior
    return {"trace": name, "backfill": backfill, "prior": prior, "best_heuristic": best,
            "mean_bsld": means,
            "versus_best": {p: means[p] / means[best] - 1.0 for p in policies
                            if p not in HEURISTICS}}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=Path, required=True,
                   help="generalisation.py's --runs (folders TRACE-BACKFILL-sSEED)")
    add_cell_options(p, "seed_ensemble")
    p.add_argument("--seeds", type=lambda s: [int(x) for x in s.split(",")], default=[1, 2, 3])
    a = p.parse_args(argv)
    each_cell(a, cell, lambda c: (
        f"seed_ensemble {c['trace']} {c['backfill']} (prior {c['prior']}, best heuristic "
        f"{c['best_heuristic']}): "
        + ", ".join(f"{p} {v:+.1%}" for p, v in c["versus_best"].items())))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
