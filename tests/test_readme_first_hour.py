"""The README's "First hour on a real log" walk-through runs as written, on a shared trace.

The block after the ``<!-- first-hour -->`` marker is read from README.md; each command (``\\``
continuations joined, comments dropped) runs in-process in a scratch folder that holds the
trace under the name the README uses. Every step must succeed and leave what the next reads.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from pathlib import Path

from cli_helpers import invoke
from conftest import ROOT, shared_file

MARKER = "<!-- first-hour -->"


def _commands() -> list[list[str]]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = re.search(re.escape(MARKER) + r"\s*```bash\n(.*?)```", text, re.S)
    assert block is not None, f"README.md has no ```bash block after {MARKER}"
    joined = block[1].replace("\\\n", " ")
    return [shlex.split(line) for line in joined.splitlines()
            if line.strip() and not line.lstrip().startswith("#")]


def test_the_walkthrough_is_the_documented_sequence() -> None:
    steps = [args[1] for args in _commands()]
    assert steps[0] == "ingest" and steps[-1] == "whatif"
    assert {"stats", "simulate", "fidelity"} <= set(steps)
    assert all(args[0] == "hpcpolicy" for args in _commands())


def test_the_walkthrough_runs_on_a_shared_trace(tmp_path: Path) -> None:
    commands = _commands()
    log = commands[0][2]
    (tmp_path / log).symlink_to(shared_file(log))
    here = Path.cwd()
    os.chdir(tmp_path)
    try:
        for args in commands:
            result = invoke(*args[1:])
            assert result.exit_code == 0, (args, result.output)
    finally:
        os.chdir(here)
    out = next(Path(tmp_path, a[a.index("-o") + 1]) for a in commands if a[1] == "whatif")
    doc = json.loads((out / "report.json").read_text())
    assert doc["input"]["jobs"] > 20_000 and doc["fidelity"]["available"]
