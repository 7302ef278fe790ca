"""Command blocks in the documentation, for the tests that run them as written.

A block is the ```bash fence right after an HTML comment marker (``<!-- first-hour -->`` in
README.md, ``<!-- runnable -->`` in docs/): each line is one ``hpcpolicy`` command, ``\\``
continuations joined, comment lines dropped.
"""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path

from cli_helpers import invoke


def command_blocks(text: str, marker: str) -> list[list[list[str]]]:
    """Every block after ``marker`` in ``text``: its commands, each split as a shell would."""
    blocks = re.findall(re.escape(marker) + r"\s*```bash\n(.*?)```", text, re.S)
    return [[shlex.split(line) for line in block.replace("\\\n", " ").splitlines()
             if line.strip() and not line.lstrip().startswith("#")] for block in blocks]


def run_in(folder: Path, commands: list[list[str]]) -> None:
    """Run ``hpcpolicy`` commands in-process, in order, with ``folder`` as the working
    directory; fail on the first that does not exit 0."""
    here = Path.cwd()
    os.chdir(folder)
    try:
        for args in commands:
            assert args[0] == "hpcpolicy", args
            result = invoke(*args[1:])
            assert result.exit_code == 0, (args, result.output)
    finally:
        os.chdir(here)
