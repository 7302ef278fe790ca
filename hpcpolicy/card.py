"""The model card ``hpcpolicy train`` leaves in a policy directory (``policy/card.json``).

After an online run (ppo, ddppo), the trained policy and every registered heuristic replay the
same windows of the log's *test* part under the backfilling the policy learned with, through
:func:`hpcpolicy.evaluate.evaluate` with the options ``hpcpolicy evaluate`` defaults to (10
windows, seed 1) and the run's window size: the card's figures are the ones the command it
records prints. The card also says which log and period the policy learned on, warns when the
policy loses to the best heuristic, and carries the policy's guard
(:mod:`hpcpolicy.deploy.guard`): that heuristic, deployed in the policy's place when it lost.
Where the test part holds no window the card says why it has no comparison. It sits with
``evaluate``, above the training entry point, so the command (or a library user, after
:func:`hpcpolicy.train`) writes it: :func:`model_card`.

Example:
    >>> headline({"skipped": "no test part"})
    'no test comparison: no test part'
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpcpolicy.errors import ConfigError

if TYPE_CHECKING:
    from hpcpolicy.training import Trained
    from hpcpolicy.training.options import TrainOptions

Step = Callable[[str, int, int], None]

__all__ = ["CARD_FILE", "CARD_FORMAT", "build_card", "headline", "model_card"]

CARD_FILE = "card.json"
"""The card's name in a policy directory."""
CARD_FORMAT = "hpcpolicy.model-card"
"""The card's ``format`` field (schemas/model_card.schema.json)."""
CARD_WINDOWS, CARD_SEED = 10, 1
"""``hpcpolicy evaluate``'s default window count and seed, which the card uses."""


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


def _test(table: Path, policy: Path, opts: TrainOptions, on_step: Step | None) -> dict[str, Any]:
    """The test-split comparison (raises ConfigError when the test part holds no window)."""
    from hpcpolicy.compat import compat_preset
    from hpcpolicy.env.factory import load
    from hpcpolicy.evaluate import EvaluateConfig, evaluate
    from hpcpolicy.policies.heuristics import HEURISTICS

    names = tuple(HEURISTICS)
    cfg = EvaluateConfig(policies=(*names, str(policy)), backfills=(opts.backfill,),
                         windows=CARD_WINDOWS, window_size=opts.window_size, seed=CARD_SEED,
                         split="test", train_frac=opts.train_frac, warm=opts.warm,
                         compat=opts.compat,
                         exclusive_nodes=compat_preset(opts.compat).exclusive_nodes)
    workload, machine = load(table, opts.workload().to_dict(),
                             None if opts.cluster is None else str(opts.cluster), opts.procs)
    ev = evaluate(workload, machine, cfg, on_step=on_step)
    scores = []
    for run in ev.runs:
        spread = ev.spread(run)["mean_bsld"]
        scores.append({"policy": run.config.policy,
                       "kind": "learned" if run.config.policy in ev.learned else "heuristic",
                       "mean_bsld": run.summary["mean_bsld"], **spread})
    best, best_bsld = ev.best_heuristics()[opts.backfill]
    return {"split": "test", "train_frac": opts.train_frac, "backfill": opts.backfill,
            "window_size": opts.window_size, "windows": CARD_WINDOWS, "seed": CARD_SEED,
            "starts": list(ev.starts), "scores": scores,
            "best_heuristic": {"policy": best, "mean_bsld": best_bsld},
            "versus_best": ev.versus_best(ev.runs[-1]),
            "evaluate": _command(table, policy, opts, names)}


def build_card(table: Path, policy: Path, opts: TrainOptions,
               on_step: Step | None = None) -> dict[str, Any]:
    """The card of the online policy ``policy`` trained on ``table`` with ``opts``; the data
    and period it learned on come from its manifest (``on_step``: evaluate's progress)."""
    manifest = json.loads((policy / "manifest.json").read_text(encoding="utf-8"))
    card: dict[str, Any] = {"format": CARD_FORMAT, "card_version": 1, "algo": manifest["algo"],
                            "training_data": manifest["training_data"],
                            "period": _period(manifest["provenance"]["split"]), "test": None,
                            "skipped": None, "warning": None, "guard": None}
    if opts.split == "all":
        card["skipped"] = ("trained on all of the log (--split all): no later part is left to "
                           "test on")
        return card
    try:
        test = _test(table, policy, opts, on_step)
    except ConfigError as exc:
        card["skipped"] = f"the test part holds no window: {exc}"
        return card
    card["test"] = test
    change, best = test["versus_best"], test["best_heuristic"]
    lost = change is not None and change > 0
    if lost:
        card["warning"] = (f"the policy loses to {best['policy']} on the test split "
                           f"({change:+.1%} mean bsld under backfilling {opts.backfill}): its "
                           f"guard runs {best['policy']} in its place; retrain, or delete "
                           "card.json to deploy the policy anyway")
    card["guard"] = {"fallback": best["policy"], "rule": "lost-on-test", "active": lost}
    return card


def model_card(trained: Trained, table: str | Path, opts: TrainOptions,
               on_step: Step | None = None) -> dict[str, Any] | None:
    """Build the card of an online run's policy and write it to ``policy/card.json``
    (atomically); None for the other routes, or a run stopped before its first policy.

    Args:
        trained: What :func:`hpcpolicy.train` returned.
        table: The job table it trained on.
        opts: The options it trained with.
        on_step: Progress callback of :func:`hpcpolicy.evaluate.evaluate`.
    """
    from hpcpolicy.atomic import write_json

    if trained.route != "online" or not (trained.policy / "manifest.json").is_file():
        return None
    card = build_card(Path(table), trained.policy, opts, on_step)
    write_json(trained.policy / CARD_FILE, card)
    return card


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
