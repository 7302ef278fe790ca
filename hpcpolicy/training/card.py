"""The model card an online run leaves in its policy directory (``policy/card.json``).

The card answers two questions on two different periods.

* **Which policy to deploy** is decided on the *validation* part: the last ``val_frac`` of the
  jobs before the test part, which no training episode used (:mod:`hpcpolicy.training.
  validation`). The policy and every registered heuristic replay its latest side-by-side
  windows; the best heuristic there is the guard's fallback, and the policy is deployed only
  when it beats it with confidence on those paired windows
  (:func:`hpcpolicy.deploy.improvement.decide`); otherwise the guard
  (:mod:`hpcpolicy.deploy.guard`, rule :data:`GUARD_RULE`) runs the heuristic in its place.
* **How it does on the months after** is reported on the windows of the log's *test* part,
  under the backfilling the policy learned with, through :func:`hpcpolicy.evaluate.evaluate`
  with the options ``hpcpolicy evaluate`` defaults to (10 windows, seed 1) and the run's
  window size: the card's figures are the ones the command it records prints. The test part
  plays no role in the decision, so it stays an honest estimate of what deploying gives.

The card also says which log and period the policy learned on, and warns when the policy
loses to the best heuristic on the test part. Where a part holds no window the card says why.
:func:`hpcpolicy.train` writes it as the last step of an online run (:func:`model_card`: the
snapshot choice, then the card), through :func:`write_card`, which binds it to the model beside
it (version 3, :mod:`hpcpolicy.deploy.binding`): readers refuse a card that is unbound,
edited, or beside another model.

Example:
    >>> headline({"skipped": "no test part"})
    'no test comparison: no test part'
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpcpolicy.errors import ConfigError
from hpcpolicy.training.snapshots import select_snapshot
from hpcpolicy.training.validation import (
    VALIDATION_WINDOWS,
    Step,
    compare,
    earlier_fallback,
    fallback_of,
    heuristics_on,
    heuristics_too_close,
    load_table,
    record,
)
from hpcpolicy.world.protocol import TRAIN_FRAC

if TYPE_CHECKING:
    from hpcpolicy.cluster import ClusterSpec
    from hpcpolicy.training.hooks import Trained
    from hpcpolicy.training.options import TrainOptions
    from hpcpolicy.workload import Workload

__all__ = ["CARD_FILE", "CARD_FORMAT", "CARD_VERSION", "GUARD_RULE", "build_card", "headline",
           "model_card", "write_card"]

CARD_FILE = "card.json"
"""The card's name in a policy directory."""
CARD_FORMAT = "hpcpolicy.model-card"
"""The card's ``format`` field (schemas/model_card.schema.json)."""
CARD_VERSION = 3
"""The card's ``card_version``: 3 is bound to its model (``binding``)."""
CARD_WINDOWS, CARD_SEED = 10, 1
"""``hpcpolicy evaluate``'s default window count and seed, which the card uses."""
GUARD_RULE = "beats-best-on-validation"
"""The guard's rule: active unless the policy beat the best heuristic on validation."""


def _day(epoch: int) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%d")


def _period(split: dict[str, Any]) -> dict[str, Any]:
    first, last = split["submit_s"]
    return {"part": split["part"], "jobs": split["jobs"], "from": _day(first), "to": _day(last)}


def _command(table: Path, policy: Path, opts: TrainOptions, names: tuple[str, ...]) -> str:
    extra = "".join(flag for flag, on in (
        (f" --train-frac {opts.train_frac:g}", opts.train_frac != TRAIN_FRAC),
        (" --warm", opts.warm), (f" --compat {opts.compat}", opts.compat is not None),
        (f" --procs {opts.procs}", opts.procs is not None),
        (f" --procs-from {opts.procs_from}", opts.procs_from is not None),
        (f" --walltime-fallback {opts.walltime_fallback}", opts.walltime_fallback is not None),
        (f" --cluster {opts.cluster}", opts.cluster is not None)) if on)
    return (f"hpcpolicy evaluate {table} --policy {','.join(names)},{policy} --backfill "
            f"{opts.backfill} --window-size {opts.window_size} --windows {CARD_WINDOWS} "
            f"--seed {CARD_SEED}{extra}")


def _test(workload: Workload, machine: ClusterSpec, table: Path, policy: Path,
          opts: TrainOptions, on_step: Step | None) -> dict[str, Any]:
    """The test-split comparison (raises ConfigError when the test part holds no window)."""
    from hpcpolicy.policies.heuristics import HEURISTICS

    ev = compare(workload, machine, (*HEURISTICS, str(policy)), opts,
                 {"windows": CARD_WINDOWS, "seed": CARD_SEED, "split": "test"}, on_step)
    return {"split": "test", "train_frac": opts.train_frac, "backfill": opts.backfill,
            "window_size": opts.window_size, "windows": CARD_WINDOWS, "seed": CARD_SEED,
            **record(ev, opts), "versus_best": ev.versus_best(ev.runs[-1]),
            "evaluate": _command(table, policy, opts, tuple(HEURISTICS))}


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
    ev, seen = heuristics_on(workload, machine, opts, starts, on_step, policy)
    val = {"val_frac": opts.val_frac,
           "jobs": list(validation_range(len(workload), opts.train_frac, opts.val_frac)),
           "window_size": opts.window_size, **seen, "versus_best": ev.versus_best(ev.runs[-1])}
    earlier = earlier_fallback(workload, machine, opts, val, on_step)
    if earlier is not None:
        val["fallback_chosen_on"] = earlier
    fallback = fallback_of(val)
    per_window = {run.config.policy: [float(w.summary["mean_bsld"]) for w in run.windows]
                  for run in ev.runs}
    val["decision"] = decide(per_window[str(policy)], per_window[fallback])
    return val


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
