"""The README's "First hour on a real log" walk-through runs as written, on a shared trace.

The block after the ``<!-- first-hour -->`` marker is read from README.md; each command runs
in-process in a scratch folder that holds the trace under the name the README uses. Every step
must succeed and leave what the next reads.
"""

from __future__ import annotations

import json
from pathlib import Path

from conftest import ROOT, shared_file
from doc_blocks import command_blocks, run_in

MARKER = "<!-- first-hour -->"


def _commands() -> list[list[str]]:
    blocks = command_blocks((ROOT / "README.md").read_text(encoding="utf-8"), MARKER)
    assert len(blocks) == 1, f"README.md must have one ```bash block after {MARKER}"
    return blocks[0]


def test_the_walkthrough_is_the_documented_sequence() -> None:
    steps = [args[1] for args in _commands()]
    assert steps[0] == "ingest" and steps[-1] == "whatif"
    assert {"stats", "simulate", "fidelity"} <= set(steps)
    assert all(args[0] == "hpcpolicy" for args in _commands())


def test_the_walkthrough_runs_on_a_shared_trace(tmp_path: Path) -> None:
    commands = _commands()
    log = commands[0][2]
    (tmp_path / log).symlink_to(shared_file(log))
    run_in(tmp_path, commands)
    out = next(Path(tmp_path, a[a.index("-o") + 1]) for a in commands if a[1] == "whatif")
    doc = json.loads((out / "report.json").read_text())
    assert doc["input"]["jobs"] > 20_000 and doc["fidelity"]["available"]
