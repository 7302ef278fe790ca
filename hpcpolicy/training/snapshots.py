"""The policy an online run deploys: the best of its final policy and its snapshots on the
validation part (the last policy is not always the best)."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpcpolicy.errors import ConfigError
from hpcpolicy.training.validation import VALIDATION_WINDOWS, Step, compare, load_table

if TYPE_CHECKING:
    from hpcpolicy.cluster import ClusterSpec
    from hpcpolicy.training.options import TrainOptions
    from hpcpolicy.workload import Workload

__all__ = ["select_snapshot"]


def _swap_in(snapshot: Path, policy: Path) -> None:
    """Replace the directory ``policy`` by a copy of ``snapshot``, never leaving it half
    written: the copy is made beside it, then renamed over it."""
    tmp = Path(tempfile.mkdtemp(prefix=".policy-", dir=policy.parent))
    shutil.copytree(snapshot, tmp / "new")
    old = tmp / "old"
    policy.rename(old)
    (tmp / "new").rename(policy)
    shutil.rmtree(tmp)


def select_snapshot(table: Path, policy: Path, opts: TrainOptions,
                    on_step: Step | None = None, *,
                    loaded: tuple[Workload, ClusterSpec] | None = None
                    ) -> dict[str, Any] | None:
    """Deploy the run's best policy on the validation part in ``policy``: the final policy
    and every snapshot (``snapshots/update_NNNNNN``, exported every ``snapshot_every``
    updates) replay the validation windows, and the lowest mean bounded slowdown there takes
    ``policy/`` (ties keep the final policy). The guard is then decided on the same windows:
    the chosen policy's edge there is a little optimistic (the best of a few), which the
    guard's confidence bound absorbs; the test part, used for neither, stays an honest
    estimate.

    Returns:
        ``{"candidates": [{"policy", "mean_bsld"}...], "chosen": NAME}`` (NAME: ``final`` or
        the snapshot's directory name), or None without snapshots or validation windows.
        (``loaded``: :func:`~hpcpolicy.training.validation.load_table`'s answer, when the
        caller has it already.)
    """
    from hpcpolicy.world.split import validation_starts

    folder = policy.parent / "snapshots"
    snaps = sorted(p for p in folder.glob("update_*") if (p / "manifest.json").is_file()) \
        if folder.is_dir() else []
    if not snaps or opts.split == "all" or opts.val_frac <= 0:
        return None
    workload, machine = loaded or load_table(table, opts)
    try:
        starts = validation_starts(len(workload), opts.train_frac, opts.val_frac,
                                   size=opts.window_size, count=VALIDATION_WINDOWS)
    except ConfigError:
        return None
    ev = compare(workload, machine, tuple(map(str, (policy, *snaps))), opts,
                 {"starts": starts, "split": "all"}, on_step)
    scores = [float(run.summary["mean_bsld"]) for run in ev.runs]
    best = min(range(len(scores)), key=lambda i: (scores[i], i))  # ties: the final policy
    names = ["final", *(p.name for p in snaps)]
    if best:
        _swap_in(snaps[best - 1], policy)
    return {"candidates": [{"policy": n, "mean_bsld": s} for n, s in zip(names, scores,
                                                                           strict=True)],
            "chosen": names[best]}
