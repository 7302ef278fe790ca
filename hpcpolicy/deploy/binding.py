"""A model card bound to the model it describes (``card.json``'s ``binding``).

The card (:mod:`hpcpolicy.training.card`) carries the figures a report quotes and the guard
that decides what is deployed; the manifest and the ONNX model are what runs. ``binding`` ties them:

* ``manifest_sha256``: the SHA-256 of ``manifest.json`` as it was when the card was written;
* ``model_sha256``: the SHA-256 of the ONNX model (``files.onnx`` of that manifest);
* ``card_sha256``: the SHA-256 of the card itself without ``binding`` (:func:`card_digest`:
  its JSON with sorted keys and no spaces, so that re-indenting the file changes nothing).

Before a card's guard or figures are used (:func:`hpcpolicy.deploy.guard.read_card`), all three
are checked against the folder (:func:`check_binding`), with the card's schema: a card edited by
hand, a card copied next to another model, or a guard of the wrong type (``"active": "true"``)
is refused in one line instead of silently deciding what runs.

What this proves, and what not: the three hashes sit in the same folder as what they hash, so
anyone who can write the folder can recompute them. The binding catches accidental edits, a card
left beside a retrained model, partial copies and mismatched files; it does not stop a forger.
Against a forger, sign the folder with a key kept elsewhere (``hpcpolicy sign``; see
:mod:`hpcpolicy.signature`).

Example:
    >>> card_digest({"b": 1, "a": [1.5, None]}) == card_digest({"a": [1.5, None], "b": 1})
    True
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from hpcpolicy.artifact import MANIFEST_FILE, check_schema, member
from hpcpolicy.atomic import file_sha256
from hpcpolicy.docload import read_json
from hpcpolicy.errors import ArtifactError

__all__ = ["BINDING", "bind", "card_digest", "check_binding", "model_hashes"]

BINDING = "binding"
"""The card's field holding the three hashes."""


def card_digest(card: dict[str, Any]) -> str:
    """SHA-256 of the card's content without :data:`BINDING` (canonical JSON)."""
    body = {k: v for k, v in card.items() if k != BINDING}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def model_hashes(directory: Path) -> dict[str, str | None]:
    """``manifest_sha256`` and ``model_sha256`` of the policy folder as it is now (the model's
    None for a kind of artifact without one ONNX file of its own).

    Raises:
        ArtifactError: No readable manifest, or a model path that leads outside the folder.
    """
    manifest_file = directory / MANIFEST_FILE
    if not manifest_file.is_file():
        raise ArtifactError(f"{directory}: no {MANIFEST_FILE} next to card.json; copy the whole "
                            "policy folder")
    manifest = read_json(manifest_file, "policy manifest", ArtifactError)
    files = manifest.get("files") if isinstance(manifest, dict) else None
    entry = files.get("onnx") if isinstance(files, dict) else None
    model = None
    if isinstance(entry, dict) and isinstance(entry.get("path"), str):
        file = member(directory, entry["path"], "files.onnx.path")
        model = file_sha256(file) if file.is_file() else "missing"
    return {"manifest_sha256": file_sha256(manifest_file), "model_sha256": model}


def bind(card: dict[str, Any], directory: Path) -> dict[str, Any]:
    """``card`` with its :data:`BINDING` to the policy folder ``directory`` (which holds the
    manifest and model it describes)."""
    return {**{k: v for k, v in card.items() if k != BINDING},
            BINDING: {**model_hashes(directory), "card_sha256": card_digest(card)}}


def check_binding(card: dict[str, Any], directory: Path, where: Path) -> None:
    """Refuse a card that is unbound, breaks its schema, was changed, or describes another
    model than the one in ``directory``.

    Args:
        card: The parsed card.
        directory: Its policy folder.
        where: The card's file, named in the errors.

    Raises:
        ArtifactError: One line saying which, and what to do.
    """
    if BINDING not in card:
        raise ArtifactError(f"{where}: the model card is not bound to a model (no {BINDING!r}: "
                            "written before card version 3, or stripped); retrain the policy "
                            "for a bound card, or delete card.json to use the policy without "
                            "its card and guard")
    check_schema(card, "model_card", where, "model card",
                 fix="retrain the policy, or delete card.json to use it without its card")
    recorded = card[BINDING]
    if recorded["card_sha256"] != card_digest(card):
        raise ArtifactError(f"{where}: the model card was changed after it was written (its "
                            "SHA-256 differs from binding.card_sha256); its figures and guard "
                            "cannot be trusted: retrain the policy, or restore the card")
    now = model_hashes(directory)
    differ = [name for name, value in now.items() if recorded[name] != value]
    if differ:
        raise ArtifactError(f"{where}: the model card describes another model than the one in "
                            f"{directory} ({', '.join(differ)} differ); keep each card with "
                            "its own policy folder, or retrain")
