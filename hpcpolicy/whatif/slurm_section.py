"""The report's ``slurm`` section: each configuration candidate as a change to apply.

For every change compared (:mod:`.slurm_candidates`), the section holds the exact change (the
unified diff against the slurm.conf given, which ``patch -p1 -d FOLDER`` applies; the
``sacctmgr`` commands for QOS and association limits), how to make Slurm take it (``scontrol
reconfigure``, or the keys that need a restart) and what to watch afterwards (``sprio``,
``sshare``, ``sdiag``), all from :func:`hpcpolicy.slurmconf.change_advice`. :func:`markdown`
and :func:`html_context` show it in report.md and report.html.

Example:
    >>> slurm_section(None, [])
    {}
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from hpcpolicy.slurmconf import change_advice, changed_keys
from hpcpolicy.slurmconf.advice import RESTART_KEYS
from hpcpolicy.textfmt import visible

if TYPE_CHECKING:
    from hpcpolicy.whatif.slurm_candidates import SlurmSite
    from hpcpolicy.whatif.spec import RunSpec

__all__ = ["Run", "html_context", "markdown", "slurm_section"]

POLICY_NOTE = ("a policy candidate (such as sjf+easy) is replayed by the pooled engine on "
               "slurm.conf's nodes and compared with the site's configuration replayed in the "
               "Slurm world: its difference holds the policy and the two engines' models")
"""What a policy candidate is compared against when the baseline is slurm.conf."""


class Run(Protocol):
    """What the section reads of a run (:class:`~hpcpolicy.whatif.runner.WhatifRun`)."""

    @property
    def id(self) -> str: ...
    @property
    def role(self) -> str: ...
    @property
    def spec(self) -> RunSpec: ...


def _candidate(site: SlurmSite, change: str, runs: Sequence[Run]) -> dict[str, Any]:
    new = site.changed[change]
    advice = change_advice(site.conf, new)
    keys = changed_keys(site.conf, new)
    return {"change": change, "runs": [r.id for r in runs if r.spec.change == change],
            "keys": keys, "diff": advice.diff, "patch_folder": os.path.dirname(
                os.path.abspath(site.path)), "sacctmgr": list(advice.sacctmgr),
            "apply": list(advice.steps),
            "restart_keys": sorted({k.split(".")[0] for k in keys} & RESTART_KEYS),
            "watch": list(advice.watch)}


def slurm_section(site: SlurmSite | None, runs: Sequence[Run]) -> dict[str, Any]:
    """``{"slurm": ...}`` for report.json when the baseline is slurm.conf, else ``{}``."""
    if site is None:
        return {}
    baseline = next(r.id for r in runs if r.role == "baseline")
    policies = any(r.spec.change is None for r in runs)
    return {"slurm": {
        "conf": site.path, "sacctmgr": site.sacctmgr, "baseline_run": baseline,
        "unknown_keys": [s.key for s in site.conf.unknown],
        "policy_note": POLICY_NOTE if policies else None,
        "candidates": [_candidate(site, change, runs) for change in site.changed]}}


def _shown(text: str) -> str:
    """Lines of text made visible one by one (:func:`visible` would escape their ends), whole:
    cutting a long word would change a diff or a command."""
    return "\n".join(visible(line, longest=None) for line in text.split("\n"))


def _fenced(text: str, lang: str = "") -> list[str]:
    """``text`` as a Markdown fenced block, the fence longer than any run of backticks."""
    body = _shown(text).rstrip("\n")
    fence = "`" * max(3, max((len(r) for r in re.findall("`+", body)), default=0) + 1)
    return [f"{fence}{lang}", body, fence, ""]


Text = Callable[[object], str]


def markdown(doc: dict[str, Any], escape: Text, code_span: Text) -> list[str]:
    """The section's lines of report.md (none without it); ``escape`` and ``code_span`` are
    report.md's own (:mod:`hpcpolicy.whatif.markdown`)."""
    section = doc.get("slurm")
    if not section:
        return []
    lines = ["## Configuration changes: what to apply", "",
             f"Baseline: {code_span(section['conf'])} as given, replayed in the Slurm world"
             + (f", with the sacctmgr dumps in {code_span(section['sacctmgr'])}"
                if section["sacctmgr"] else "") + ".", ""]
    if section["policy_note"]:
        lines += [f"Note: {escape(section['policy_note'])}.", ""]
    for c in section["candidates"]:
        lines += [f"### {escape(c['change'])}", ""]
        if c["diff"]:
            patch = code_span(f"patch -p1 -d {c['patch_folder']}")
            lines += [f"The change to slurm.conf ({patch} < change.diff):", "",
                      *_fenced(c["diff"], "diff")]
        if c["sacctmgr"]:
            lines += ["QOS and association limits:", "", *_fenced("\n".join(c["sacctmgr"]),
                                                                    "sh")]
        if c["apply"]:
            lines += ["To apply it:", "", *[f"{n}. {escape(s)}"
                                            for n, s in enumerate(c["apply"], 1)], ""]
        if c["watch"]:
            lines += ["Watch afterwards:", "", *[f"- {escape(w)}" for w in c["watch"]], ""]
    return lines


def html_context(doc: dict[str, Any]) -> dict[str, Any] | None:
    """The section as report.html's template shows it (the diff and commands as escaped
    markup, shown whole: the page's cutting of long words would change them); None without
    it."""
    import markupsafe

    section = doc.get("slurm")
    if not section:
        return None

    def block(text: str) -> markupsafe.Markup:
        return markupsafe.escape(_shown(text))

    return {**section, "candidates": [
        {**c, "diff": block(c["diff"]), "sacctmgr": block("\n".join(c["sacctmgr"]))}
        for c in section["candidates"]]}
