"""The model card ``hpcpolicy train`` leaves in a policy directory (``policy/card.json``).

After an online run (ppo, ddppo) the card answers two questions on two different periods.

* **Which policy to deploy** is decided on the *validation* part: the last ``val_frac`` of the
  jobs before the test part, which no training episode used (:func:`hpcpolicy.world.split.
  validation_starts`). The policy and every registered heuristic replay its latest
  side-by-side windows; the best heuristic there is the guard's fallback, and the policy is
  deployed only when it beats it with confidence on those paired windows
  (:func:`hpcpolicy.deploy.improvement.decide`); otherwise the guard
  (:mod:`hpcpolicy.deploy.guard`, rule :data:`GUARD_RULE`) runs the heuristic in its place.
* **How it does on the months after** is reported on the windows of the log's *test* part,
  under the backfilling the policy learned with, through :func:`hpcpolicy.evaluate.evaluate`
  with the options ``hpcpolicy evaluate`` defaults to (10 windows, seed 1) and the run's
  window size: the card's figures are the ones the command it records prints. The test part
  plays no role in the decision, so it stays an honest estimate of what deploying gives.

The card also says which log and period the policy learned on, and warns when the policy
loses to the best heuristic on the test part. Where a part holds no window the card says why.
It sits with ``evaluate``, above the training entry point, so the command (or a library
user, after :func:`hpcpolicy.train`) writes it: :func:`model_card`, through :func:`write_card`,
which binds it to the model beside it (version 3, :mod:`hpcpolicy.deploy.binding`): readers
refuse a card that is unbound, edited, or beside another model.

Example:
    >>> headline({"skipped": "no test part"})
    'no test comparison: no test part'
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpcpolicy.errors import ConfigError

if TYPE_CHECKING:
    from hpcpolicy.cluster import ClusterSpec
    from hpcpolicy.evaluate import Evaluation
    from hpcpolicy.training import Trained
    from hpcpolicy.training.options import TrainOptions
    from hpcpolicy.workload import Workload

Step = Callable[[str, int, int], None]

__all__ = ["CARD_FILE", "CARD_FORMAT", "CARD_VERSION", "GUARD_RULE", "SEPARATION",
           "VALIDATION_WINDOWS", "build_card", "cannot_learn", "compare", "fallback_of", "headline",
           "heuristics_too_close", "load_table", "model_card", "select_snapshot", "write_card"]

CARD_FILE = "card.json"
"""The card's name in a policy directory."""
CARD_FORMAT = "hpcpolicy.model-card"
"""The card's ``format`` field (schemas/model_card.schema.json)."""
CARD_VERSION = 3
"""The card's ``card_version``: 3 is bound to its model (``binding``)."""
CARD_WINDOWS, CARD_SEED = 10, 1
"""``hpcpolicy evaluate``'s default window count and seed, which the card uses."""
VALIDATION_WINDOWS = 20
"""At most this many side-by-side windows of the validation part decide the guard."""
GUARD_RULE = "beats-best-on-validation"
"""The guard's rule: active unless the policy beat the best heuristic on validation."""
SEPARATION = 0.05
"""The validation part tells the heuristics apart when the worst one's mean bsld there is at
least this share above the best one's. A quiet period (RICC's 60-70 %: every heuristic between
1.01 and 1.03) does not, and the heuristic that is best there is then little more than a guess
for the months after (``benchmarks/fallback_choice.py``): the guard's fallback is then chosen
on the jobs before it."""


def _day(epoch: int) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%d")


def _period(split: dict[str, Any]) -> dict[str, Any]:
    first, last = split["submit_s"]
    return {"part": split["part"], "jobs": split["jobs"], "from": _day(first), "to": _day(last)}


def _command(table: Path, policy: Path, opts: TrainOptions, names: tuple[str, ...]) -> str:
    extra = "".join(flag for flag, on in (
        (f" --train-frac {opts.train_frac:g}", opts.train_frac != 0.7),
        (" --warm", opts.warm), (f" --compat {opts.compat}", opts.compat is not None),
        (f" --procs {opts.procs}", opts.procs is not None),
        (f" --procs-from {opts.procs_from}", opts.procs_from is not None),
        (f" --walltime-fallback {opts.walltime_fallback}", opts.walltime_fallback is not None),
        (f" --cluster {opts.cluster}", opts.cluster is not None)) if on)
    return (f"hpcpolicy evaluate {table} --policy {','.join(names)},{policy} --backfill "
            f"{opts.backfill} --window-size {opts.window_size} --windows {CARD_WINDOWS} "
            f"--seed {CARD_SEED}{extra}")


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


def _record(ev: Evaluation, opts: TrainOptions) -> dict[str, Any]:
    """A comparison's windows, every run's score and the best heuristic, as the card keeps
    them."""
    best, best_bsld = ev.best_heuristics()[opts.backfill]
    return {"starts": list(ev.starts), "scores": _scores(ev),
            "best_heuristic": {"policy": best, "mean_bsld": best_bsld}}


def _test(workload: Workload, machine: ClusterSpec, table: Path, policy: Path,
          opts: TrainOptions, on_step: Step | None) -> dict[str, Any]:
    """The test-split comparison (raises ConfigError when the test part holds no window)."""
    from hpcpolicy.policies.heuristics import HEURISTICS

    ev = compare(workload, machine, (*HEURISTICS, str(policy)), opts,
                 {"windows": CARD_WINDOWS, "seed": CARD_SEED, "split": "test"}, on_step)
    return {"split": "test", "train_frac": opts.train_frac, "backfill": opts.backfill,
            "window_size": opts.window_size, "windows": CARD_WINDOWS, "seed": CARD_SEED,
            **_record(ev, opts), "versus_best": ev.versus_best(ev.runs[-1]),
            "evaluate": _command(table, policy, opts, tuple(HEURISTICS))}


def _heuristics_on(workload: Workload, machine: ClusterSpec, opts: TrainOptions,
                   starts: tuple[int, ...], on_step: Step | None,
                   policy: Path | None = None) -> tuple[Evaluation, dict[str, Any]]:
    """Every heuristic (and ``policy``, last) on the windows at ``starts``: the evaluation and
    its ``starts``/``scores``/``best_heuristic`` record."""
    from hpcpolicy.policies.heuristics import HEURISTICS

    names = (*HEURISTICS, *(() if policy is None else (str(policy),)))
    ev = compare(workload, machine, names, opts, {"starts": starts, "split": "all"}, on_step)
    return ev, _record(ev, opts)


def _earlier_fallback(workload: Workload, machine: ClusterSpec, opts: TrainOptions,
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
    _, earlier = _heuristics_on(workload, machine, opts, starts, on_step)
    if heuristics_too_close(earlier):
        return None
    return {"jobs": list(validation_range(len(workload), end, opts.val_frac)), **earlier}


def _validation(workload: Workload, machine: ClusterSpec, policy: Path, opts: TrainOptions,
                on_step: Step | None) -> dict[str, Any]:
    """The validation comparison and the guard decided on it (raises ConfigError when the
    validation part holds no window). Where that part cannot tell the heuristics apart, the
    fallback is the best heuristic on the jobs before it (``fallback_chosen_on``), when those
    can."""
    from hpcpolicy.deploy.improvement import decide
    from hpcpolicy.world.split import validation_range, validation_starts

    starts = validation_starts(len(workload), opts.train_frac, opts.val_frac,
                               size=opts.window_size, count=VALIDATION_WINDOWS)
    ev, seen = _heuristics_on(workload, machine, opts, starts, on_step, policy)
    val = {"val_frac": opts.val_frac,
           "jobs": list(validation_range(len(workload), opts.train_frac, opts.val_frac)),
           "window_size": opts.window_size, **seen, "versus_best": ev.versus_best(ev.runs[-1])}
    earlier = _earlier_fallback(workload, machine, opts, val, on_step)
    if earlier is not None:
        val["fallback_chosen_on"] = earlier
    fallback = fallback_of(val)
    per_window = {run.config.policy: [float(w.summary["mean_bsld"]) for w in run.windows]
                  for run in ev.runs}
    val["decision"] = decide(per_window[str(policy)], per_window[fallback])
    return val


def prior_for(workload: Workload, machine: ClusterSpec, opts: TrainOptions,
              on_step: Step | None = None, *, refuse_tie: bool = False) -> str | None:
    """The heuristic ``train --prior auto`` starts from, chosen before training as the guard
    chooses its fallback: the best on the validation part, or on the jobs before it when the
    validation part cannot tell the heuristics apart; only heuristics that can be a prior
    (:data:`hpcpolicy.env.prior.PRIORS`) compete. None when the validation part holds no
    window.

    Raises:
        ConfigError: ``refuse_tie`` and neither part tells the heuristics apart: training
            there has nothing to learn (:func:`cannot_learn` says why and what to change).
    """
    from hpcpolicy.env.prior import PRIORS
    from hpcpolicy.world.split import validation_starts

    try:
        starts = validation_starts(len(workload), opts.train_frac, opts.val_frac,
                                   size=opts.window_size, count=VALIDATION_WINDOWS)
    except ConfigError:
        return None
    _, seen = _heuristics_on(workload, machine, opts, starts, on_step)
    earlier = _earlier_fallback(workload, machine, opts, seen, on_step)
    if refuse_tie and earlier is None and heuristics_too_close(seen):
        raise ConfigError(cannot_learn(seen, opts, machine))
    chosen_on = earlier or seen
    best: str = min((s for s in chosen_on["scores"] if s["policy"] in PRIORS),
                    key=lambda s: s["mean_bsld"])["policy"]
    return best


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


def build_card(table: Path, policy: Path, opts: TrainOptions,
               on_step: Step | None = None, *,
               loaded: tuple[Workload, ClusterSpec] | None = None) -> dict[str, Any]:
    """The card of the online policy ``policy`` trained on ``table`` with ``opts``; the data
    and period it learned on come from its manifest (``on_step``: evaluate's progress;
    ``loaded``: :func:`load_table`'s answer, when the caller has it already)."""
    manifest = json.loads((policy / "manifest.json").read_text(encoding="utf-8"))
    from hpcpolicy.env.prior import OLDEST

    order = manifest["observation"].get("slot_order", OLDEST)
    card: dict[str, Any] = {"format": CARD_FORMAT, "card_version": CARD_VERSION,
                            "algo": manifest["algo"],
                            "prior": None if order == OLDEST else order,
                            "training_data": manifest["training_data"],
                            "period": _period(manifest["provenance"]["split"]),
                            "validation": None, "test": None, "skipped": None,
                            "warning": None, "guard": None}
    if opts.split == "all":
        card["skipped"] = ("trained on all of the log (--split all): no later part is left to "
                           "validate or test on")
        return card
    workload, machine = loaded or load_table(table, opts)
    skipped = []
    if opts.val_frac > 0:
        try:
            card["validation"] = _validation(workload, machine, policy, opts, on_step)
        except ConfigError as exc:
            skipped.append(f"no guard: {exc}")
    else:
        skipped.append("no guard: --val-frac 0 keeps no validation part")
    try:
        card["test"] = _test(workload, machine, table, policy, opts, on_step)
    except ConfigError as exc:
        skipped.append(f"the test part holds no window: {exc}")
    card["skipped"] = "; ".join(skipped) or None
    warnings = []
    test = card["test"]
    if test is not None and test["versus_best"] is not None and test["versus_best"] > 0:
        warnings.append(f"the policy loses to {test['best_heuristic']['policy']} on the test "
                        f"split ({test['versus_best']:+.1%} mean bsld under backfilling "
                        f"{opts.backfill})")
    val = card["validation"]
    if val is not None:
        fallback, deploy = fallback_of(val), val["decision"]["deploy"]
        card["guard"] = {"fallback": fallback, "rule": GUARD_RULE, "active": not deploy}
        if not deploy:
            warnings.append(f"it did not beat {fallback} on the validation part with "
                            f"{val['decision']['confidence']:.0%} confidence, so its guard "
                            f"runs {fallback} in its place; retrain, or delete card.json to "
                            "deploy the policy anyway")
        too_close = heuristics_too_close(val)
        if too_close:
            earlier = val.get("fallback_chosen_on")
            warnings.append(too_close + (
                f"; the fallback {fallback} was chosen on the jobs before it "
                f"({earlier['jobs'][0]}..{earlier['jobs'][1] - 1})" if earlier else
                f"; the fallback {fallback} is close to a guess"))
    card["warning"] = "; ".join(warnings) or None
    return card


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
    updates; the last policy is not always the best) replay the validation windows, and the
    lowest mean bounded slowdown there takes ``policy/`` (ties keep the final policy). The
    guard is then decided on the same windows: the chosen policy's edge there is a little
    optimistic (the best of a few), which the guard's confidence bound absorbs; the test part,
    used for neither, stays an honest estimate.

    Returns:
        ``{"candidates": [{"policy", "mean_bsld"}...], "chosen": NAME}`` (NAME: ``final`` or
        the snapshot's directory name), or None without snapshots or validation windows.
        (``loaded``: :func:`load_table`'s answer, when the caller has it already.)
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


def model_card(trained: Trained, table: str | Path, opts: TrainOptions,
               on_step: Step | None = None) -> dict[str, Any] | None:
    """Deploy the run's best snapshot on the validation part in ``policy/``
    (:func:`select_snapshot`), build its card (with ``selection``: what
    that chose) and write it to ``policy/card.json`` (atomically); None for the other routes,
    or a run stopped before its first policy.

    Args:
        trained: What :func:`hpcpolicy.train` returned.
        table: The job table it trained on.
        opts: The options it trained with.
        on_step: Progress callback of :func:`hpcpolicy.evaluate.evaluate`.
    """
    if trained.route != "online" or not (trained.policy / "manifest.json").is_file():
        return None
    table = Path(table)
    loaded = None if opts.split == "all" else load_table(table, opts)  # read once, for both
    selection = select_snapshot(table, trained.policy, opts, on_step, loaded=loaded)
    card = build_card(table, trained.policy, opts, on_step, loaded=loaded)
    card["selection"] = selection
    return write_card(trained.policy, card)


def write_card(policy: Path, card: dict[str, Any]) -> dict[str, Any]:
    """Bind ``card`` to the model in the policy folder ``policy``, check it against its schema
    and write it to ``policy/card.json`` (atomically).

    Returns:
        The card as written (with ``binding``).

    Raises:
        ArtifactError: The card breaks its schema (a bug in the code that built it).
    """
    from hpcpolicy.artifact import check_schema
    from hpcpolicy.atomic import write_json
    from hpcpolicy.deploy.binding import bind

    bound = bind(card, policy)
    check_schema(bound, "model_card", policy / CARD_FILE, "model card")
    write_json(policy / CARD_FILE, bound)
    return bound


def headline(card: dict[str, Any]) -> str:
    """One line: the policy's test score against the best heuristic, or why there is none."""
    test = card.get("test")
    if not test:
        return f"no test comparison: {card.get('skipped') or 'not recorded'}"
    mine = next(s for s in test["scores"] if s["kind"] == "learned")
    best = test["best_heuristic"]
    change = test["versus_best"]
    versus = "" if change is None else f" ({change:+.1%})"
    return (f"test split, backfill {test['backfill']}, {len(test['starts'])} window(s): mean "
            f"bsld {mine['mean_bsld']:.2f}{versus} vs best heuristic {best['policy']} "
            f"{best['mean_bsld']:.2f}")
