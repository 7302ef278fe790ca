"""A trained policy's guard: the heuristic deployed in its place when its card says it lost.

``hpcpolicy train`` writes a model card into the policy directory
(:mod:`hpcpolicy.training.card`) with ``guard = {"fallback": NAME, "rule": RULE, "active":
BOOL}``. Rule ``beats-best-on-validation``: NAME is the best heuristic on the validation part
kept out of training, and the guard is active unless the policy beat it there with confidence
(:mod:`hpcpolicy.deploy.improvement`). Cards written before it carry ``lost-on-test`` (the
same, decided on the test part). A card is used only when it is bound to the model beside it
and follows its schema (:mod:`hpcpolicy.deploy.binding`). Wherever a policy directory is resolved
(:func:`hpcpolicy.deploy.resolve.resolve_policy`: ``simulate``, ``whatif``, ``advise``) an
active guard deploys that heuristic instead; ``evaluate`` shows the deployed heuristic beside
the raw policy (:func:`guard_state`).

Example:
    >>> active_guard("sjf") is None
    True
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hpcpolicy.deploy.binding import check_binding
from hpcpolicy.docload import read_json
from hpcpolicy.errors import ArtifactError

__all__ = ["active_guard", "guard_note", "guard_state", "read_card"]


def read_card(spec: str) -> dict[str, Any] | None:
    """The model card of the policy directory ``spec``, checked against its schema and bound to
    the model beside it (:func:`~hpcpolicy.deploy.binding.check_binding`); None without one.

    Raises:
        ArtifactError: A card that cannot be read (too large, too deeply nested, not JSON),
            is not a JSON object, breaks its schema, is unbound, or was changed since it was
            written, or describes another model.
    """
    path = Path(spec) / "card.json"
    if not path.is_file():
        return None
    card = read_json(path, "model card", ArtifactError)
    if not isinstance(card, dict):
        raise ArtifactError(f"{path}: a model card is a JSON object; delete it, or retrain")
    check_binding(card, Path(spec), path)
    return card


def active_guard(spec: str) -> str | None:
    """The heuristic the policy directory ``spec`` deploys in its place, or None."""
    return _fallback(read_card(spec), spec)


def guard_state(spec: str) -> tuple[str, str | None]:
    """The guard of the policy directory ``spec`` and the heuristic it deploys:
    ``("active", NAME)``, ``("off", None)`` (its card deploys the policy) or
    ``("no card", None)``.

    Example:
        >>> guard_state(".")
        ('no card', None)
    """
    card = read_card(spec)
    fallback = _fallback(card, spec)
    return ("no card" if card is None else "active" if fallback else "off"), fallback


def _fallback(card: dict[str, Any] | None, spec: str) -> str | None:
    """The active guard's heuristic in ``card`` (``spec``'s), or None."""
    guard = None if card is None else card.get("guard")
    if not isinstance(guard, dict) or guard.get("active") is not True:
        return None
    fallback = guard.get("fallback")
    if not isinstance(fallback, str):
        raise ArtifactError(f"{spec}/card.json: guard.fallback {fallback!r} is not a heuristic "
                            "name; delete the card, or retrain")
    return fallback


def guard_note(spec: str) -> str | None:
    """What to tell the user when ``spec``'s guard is active; None otherwise."""
    card = read_card(spec)
    fallback = _fallback(card, spec)
    if card is None or fallback is None:
        return None
    where = ("lost to {} on its test split" if card["guard"].get("rule") == "lost-on-test"
             else "did not beat {} on its validation part")
    return (f"guard active: {spec} {where.format(fallback)} (card.json), so {fallback} runs "
            "in its place")
