"""What a what-if says about a trained candidate's training: the log and part it learned on,
and the backfilling it learned with.

A policy trained on part of the very log it is compared on has seen those jobs: on them the
comparison is in-sample and flatters it. Its manifest records the table (path and SHA-256),
the part of the log episodes were drawn from (``provenance.split``) and the environment's
backfilling (``provenance.environment.backfill``); :func:`training_notes` turns them into
notes for the report. A candidate with a model card (``card.json``, written by ``hpcpolicy
train``) adds the card's headline, its warning, and whether its guard deploys the fallback
heuristic in its place (:mod:`hpcpolicy.deploy.guard`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hpcpolicy.atomic import file_sha256
from hpcpolicy.deploy.guard import guard_note, read_card
from hpcpolicy.whatif.spec import RunSpec

__all__ = ["training_notes"]


def _day(epoch: Any) -> str | None:
    return datetime.fromtimestamp(int(epoch), UTC).strftime("%Y-%m-%d") \
        if isinstance(epoch, int | float) else None


def _one(spec: RunSpec, manifest: Mapping[str, Any], table_sha: str | None) -> str:
    data = manifest.get("training_data") or {}
    prov = manifest.get("provenance") or {}
    trained_bf = (prov.get("environment") or {}).get("backfill")
    how = (f"; trained with backfilling {trained_bf}, compared here with {spec.backfill}"
           if trained_bf else "")
    if table_sha is None or data.get("sha256") != table_sha:
        where = data.get("path") or "an unrecorded log"
        return f"{spec.text} was trained on another log ({where}){how}"
    split = prov.get("split") or {}
    first, last = (split.get("submit_s") or [None, None])[:2]
    if split.get("part") == "all" or _day(last) is None:
        return (f"warning: {spec.text} was trained on this same log, all of it: the "
                f"comparison is in-sample and flatters it{how}")
    return (f"warning: {spec.text} was trained on this same log, on the jobs submitted "
            f"{_day(first)} .. {_day(last)} (its {split.get('part', 'training')} part): on "
            f"those jobs the comparison is in-sample and flatters it; for an out-of-sample "
            f"answer add -s range={_day(last)}..{how}")


def _card_notes(spec: RunSpec, table_sha: str | None) -> list[str]:
    """The model card of a trained candidate: its headline with its warning, its active
    guard (and, compared on another log than the card's, that the fallback was chosen
    there)."""
    from hpcpolicy.training.card import headline

    card = read_card(spec.policy) if Path(spec.policy).is_dir() else None
    if card is None:
        return []
    # a card that warns is a warning (the terminal shows those); otherwise a note of the report
    note = f"{spec.text}'s model card: {headline(card)}"
    if card.get("warning"):
        note = f"warning: {note}; {card['warning']}"
    guard = guard_note(spec.policy)
    trained_on = (card.get("training_data") or {}).get("sha256")
    if guard is not None and table_sha is not None and trained_on != table_sha:
        guard += ("; that fallback was the best heuristic on the log it trained on, which "
                  "need not hold on this one: compare the heuristics here before deploying it")
    return [note] + ([] if guard is None else [f"warning: {guard}"])


def training_notes(specs: Sequence[RunSpec], policies: Mapping[str, Any],
                   table: str | Path | None) -> list[str]:
    """Notes on each trained candidate: which log and part it learned on, with which
    backfilling, and what its model card says.

    Args:
        specs: the compared specs (heuristics are skipped).
        policies: spec policy -> loaded policy; a trained one has ``artifact.manifest``.
        table: the compared job table (its SHA-256 is matched with the manifest's), if a file.
    """
    table_sha = file_sha256(table) if table is not None and Path(table).is_file() else None
    notes = []
    for spec in specs:
        artifact = getattr(policies.get(spec.policy), "artifact", None)
        manifest = getattr(artifact, "manifest", None)
        if isinstance(manifest, Mapping):
            notes.append(_one(spec, manifest, table_sha))
        notes += _card_notes(spec, table_sha)
    return notes
