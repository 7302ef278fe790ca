"""Security: hostile names from a log are shown as visible, cut text in every what-if output.

A file name with a backtick, a user name with a right-to-left override and zero-width
characters, a 5,000-character partition name and markup: in ``report.html``, ``report.md`` and
the terminal, none may reach the reader raw (issue 28 item 12), and ``report.md``'s prose stays
readable as plain text (issue 29 item 11: only what Markdown needs is escaped).
"""

from __future__ import annotations

import re

import pytest
from cli_helpers import invoke

from benchmarks.builders.job_tables import job_table, write_job_table
from hpcpolicy.textfmt import visible
from hpcpolicy.whatif.markdown import code_span, escape

RLO, ZWSP, ZWJ = "\u202e", "\u200b", "\u200d"
EVIL_USER = f"ev{RLO}il{ZWSP}<script>alert(1)</script>"
LONG_PARTITION = "p" * 5000
INVISIBLE = re.compile("[\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff\x00-\x08\x0b-\x1f\x7f]")


@pytest.fixture(scope="module")
def outputs(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str, str]:
    tmp = tmp_path_factory.mktemp("hostile")
    rows = [{"submit": 900 * i, "wait": 60 * (i % 5), "run_time_s": 300 + 40 * i,
             "req_cpus": 1 + i % 4, "req_walltime_s": 4000,
             "user": EVIL_USER if i % 2 else f"u{ZWJ}{i % 3}",
             "partition": LONG_PARTITION if i % 3 else "batch"} for i in range(60)]
    table = write_job_table(tmp / f"we`ird{RLO}name.parquet", job_table(rows),
                            [{"MaxProcs": 4}])
    out = tmp / f"rep{RLO}"
    result = invoke("whatif", str(table), "-c", "sjf+none", "--period", "1h",
                    "--bootstrap", "100", "-o", str(out))
    assert result.exit_code == 0, result.output
    return (result.stdout, (out / "report.md").read_text(), (out / "report.html").read_text())


@pytest.mark.parametrize("which", ["terminal", "markdown", "html"])
def test_no_invisible_or_overlong_text_reaches_the_reader(
        outputs: tuple[str, str, str], which: str) -> None:
    text = dict(zip(("terminal", "markdown", "html"), outputs, strict=True))[which]
    assert not INVISIBLE.search(text)
    assert "p" * 200 not in text
    assert "\\u202e" in text  # shown, escaped, where it was
    assert not re.search(r"(?<!\\)<script>", text)  # Markdown's \<script> shows as text


def test_the_markdown_code_span_survives_a_backtick(outputs: tuple[str, str, str]) -> None:
    line = next(ln for ln in outputs[1].splitlines() if ln.startswith("Input: "))
    span = re.match(r"Input: (`+)(.*?)\1,", line)
    assert span is not None and "we`ird" in span[2], line


def test_markdown_prose_is_plain_text() -> None:
    assert escape("fcfs+easy (mean bounded slowdown 86.37 -> 41.87 (-52%))") == \
        "fcfs+easy (mean bounded slowdown 86.37 -> 41.87 (-52%))"
    assert escape("a*b [x](y) <b> c|d `e` &amp; _f_ snake_case") == \
        "a\\*b \\[x\\](y) \\<b> c\\|d \\`e\\` \\&amp; \\_f\\_ snake_case"
    assert escape("# not a heading") == "\\# not a heading"
    assert code_span("a`b") == "``a`b``" and code_span("`x") == "`` `x ``"


def test_visible_escapes_and_cuts() -> None:
    assert visible(f"a{RLO}b{ZWSP}c") == "a\\u202eb\\u200bc"
    cut = visible("x" * 5000)
    assert len(cut) < 120 and cut.startswith("x" * 40) and "4,9" in cut
    assert visible("ok name") == "ok name"
