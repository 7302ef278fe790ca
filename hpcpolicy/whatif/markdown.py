"""``report.md``: the what-if report as Markdown, for a wiki page or a ticket.

Names from the log (users, partitions, job ids, paths) are untrusted. Every text taken from
the document is first made visible (:func:`hpcpolicy.textfmt.visible`: invisible and
direction-changing characters escaped, overlong names cut), then escaped for Markdown
(:func:`escape`), but only where a character could start markup, so that the file still reads
as plain text: ``fcfs+easy (-52%)`` stays as it is. Paths go in code spans (:func:`code_span`).
"""

from __future__ import annotations

import re
from typing import Any

from hpcpolicy.textfmt import duration, signed_percent, visible
from hpcpolicy.whatif import slurm_section
from hpcpolicy.whatif.compare import get_metric
from hpcpolicy.whatif.verdicts import (
    format_value,
    relative_change,
    relative_interval,
    verdict_phrase,
)

__all__ = ["code_span", "escape", "render_markdown"]

_ALWAYS = re.compile(r"([\\`*\[\]<|~]|&(?=#?\w+;)|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9]))")
"""Characters that open markup wherever they are: backslash, code, emphasis, links, HTML,
table cells, strike-through, an entity reference, and ``_`` except inside a word."""
_LEADING = re.compile(r"^([#>=+-]|\d+[.)])")
"""What opens a block at the start of a line: heading, quote, list, setext underline."""


def escape(text: object) -> str:
    r"""Text safe inside Markdown (and the HTML a Markdown renderer may pass through), on one
    line, readable as plain text.

    Example:
        >>> escape("fcfs+easy (-52%) -> <b>*bold*</b>")
        'fcfs+easy (-52%) -> \\<b>\\*bold\\*\\</b>'
    """
    flat = " ".join(visible(text).split())
    flat = _ALWAYS.sub(lambda m: "\\" + m.group(1), flat)
    return _LEADING.sub(lambda m: "\\" + m.group(1), flat)


def code_span(text: object) -> str:
    """``text`` as one Markdown code span, fenced by more backticks than it holds in a row.

    Example:
        >>> code_span("a`b")
        '``a`b``'
    """
    flat = " ".join(visible(text, longest=400).split())
    fence = "`" * (max((len(run) for run in re.findall("`+", flat)), default=0) + 1)
    pad = " " if flat.startswith("`") or flat.endswith("`") else ""
    return f"{fence}{pad}{flat}{pad}{fence}"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return [*lines, ""]


def _rel(value: float | None, base: float | None) -> str:
    return "-" if value is None or not base else signed_percent(value / base)


def _comparison(c: dict[str, Any], confidence: float, primary: str) -> list[str]:
    lines = [f"### {escape(c['candidate_run'])} vs {escape(c['baseline_run'])}", "",
             f"**{escape(_phrase(c, primary))}** -- {escape(c['summary'])} Paired over "
             f"{c['windows']} windows.", ""]
    rows = []
    for r in c["metrics"]:
        m = get_metric(r["key"])
        rows.append([m.label, format_value(m, r["baseline"]), format_value(m, r["candidate"]),
                     relative_change(r), relative_interval(r), r["verdict"],
                     f"{r['windows_better']}/{c['windows']}"])
    lines += _table(["metric", "baseline", "candidate", "change", f"{confidence:.0%} CI",
                     "verdict", "windows better"], rows)
    notes = [f"- {get_metric(r['key']).label}: {escape(r['rel_note'])}" for r in c["metrics"]
             if r.get("rel_note")]
    if notes:
        lines += ["Relative figures left out:", "", *notes, ""]
    if c["tradeoffs"]:
        lines += ["Trade-offs:", "", *[f"- {escape(t)}" for t in c["tradeoffs"]], ""]
    for by, title in (("user", "Users"), ("partition", "Partitions"),
                      ("size_class", "Job sizes"), ("runtime_class", "Run times")):
        groups = c["groups"].get(by) or []
        if not groups:
            continue
        lines += [f"{title} (mean wait, baseline -> candidate):", ""]
        lines += _table([by.replace("_", " "), "jobs", "baseline", "candidate", "change"], [
            [escape(g["name"]), f"{g['jobs']:,}", _dur(g["baseline_mean_wait_s"]),
             _dur(g["candidate_mean_wait_s"]),
             _rel(g["diff_mean_wait_s"], g["baseline_mean_wait_s"])] for g in groups])
    return lines


def _phrase(c: dict[str, Any], primary: str) -> str:
    """The comparison's verdict as :func:`~hpcpolicy.whatif.verdicts.verdict_phrase` says it."""
    return verdict_phrase(c["verdict"], next(r for r in c["metrics"] if r["key"] == primary))


def _dur(value: float | None) -> str:
    return "-" if value is None else duration(value)


def _fidelity(f: dict[str, Any]) -> list[str]:
    lines = ["## Fidelity: how far the replay can be trusted", ""]
    if not f["available"]:
        return [*lines, f"Not available: {escape(f['reason'])}.", ""]
    lines += [escape(f["explanation"]), ""]

    def num(v: float | None) -> str:
        return "-" if v is None else f"{v:.2f}"

    lines += _table(["figure", "value"], [
        ["jobs compared", f"{f['jobs']:,}"],
        ["logged mean wait", _dur(f["logged_mean_wait_s"])],
        ["simulated mean wait", _dur(f["simulated_mean_wait_s"])],
        ["mean absolute error", _dur(f["mean_abs_error_s"])],
        ["median absolute error", _dur(f["median_abs_error_s"])],
        ["Pearson correlation", num(f["pearson"])],
        ["Spearman rank correlation", num(f["spearman"])],
        ["Wasserstein distance", _dur(f["wasserstein_s"])],
        ["Kolmogorov-Smirnov distance", num(f["ks"])],
    ])
    if f["per_month"]:
        lines += _table(["month", "jobs", "logged mean wait", "simulated mean wait",
                         "median abs. error", "Spearman"], [
            [m["month"], f"{m['jobs']:,}", _dur(m["logged_mean_wait_s"]),
             _dur(m["simulated_mean_wait_s"]), _dur(m["median_abs_error_s"]),
             num(m["spearman"])] for m in f["per_month"]])
    lines += ["The replay does not model:", "", *[f"- {escape(x)}" for x in f["not_modelled"]],
              ""]
    return lines


def render_markdown(doc: dict[str, Any]) -> str:
    """The whole report as Markdown text."""
    cfg, inp = doc["config"], doc["input"]
    lines = [f"# {escape(doc['title'])}", "",
             f"**Verdict ({escape(doc['headline']['badge'])}).** {escape(doc['verdict'])}", "",
             *[f"**Warning.** {escape(n.removeprefix('warning: '))}\n" for n in doc["notes"]
               if n.startswith("warning: ")],
             f"Input: {code_span(inp['path'])}, {inp['jobs']:,} jobs submitted "
             f"{inp['first_submit']} .. {inp['last_submit']}. Baseline "
             f"{escape(cfg['baseline'])}; primary metric {get_metric(cfg['metric']).label}; "
             f"windows of {duration(cfg['period_s'])}; {cfg['bootstrap']:,} bootstrap "
             f"replicates, seed {cfg['seed']}. A candidate is better or worse only where the "
             f"{cfg['confidence']:.0%} confidence interval excludes zero.", ""]
    lines += ["## Runs", ""]
    lines += _table(["run", "machine", "jobs", "mean wait", "p95 wait", "mean bsld",
                     get_metric("utilization").label], [
        [escape(r["id"]), escape(next(s["cluster"]["name"] for s in doc["scenarios"]
                                      if s["id"] == r["scenario"])),
         f"{r['summary']['jobs']:,}", _dur(r["summary"]["mean_wait_s"]),
         _dur(r["summary"]["p95_wait_s"]),
         format_value(get_metric("mean_bsld"), r["summary"]["mean_bsld"]),
         format_value(get_metric("utilization"), r["summary"]["utilization"])]
        for r in doc["runs"]])
    lines += ["## Comparisons", ""]
    for c in doc["comparisons"]:
        lines += _comparison(c, cfg["confidence"], cfg["metric"])
    lines += slurm_section.markdown(doc, escape, code_span)
    lines += _fidelity(doc["fidelity"])
    if doc["notes"]:
        lines += ["## Notes", "", *[f"- {escape(n)}" for n in doc["notes"]], ""]
    return "\n".join(lines)
