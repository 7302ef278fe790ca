"""Running ``hpcpolicy`` from a benchmark: the command line, and training under a deadline."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

__all__ = ["hpcpolicy_cli", "train_until"]


def hpcpolicy_cli() -> list[str]:
    """The ``hpcpolicy`` command of the running interpreter's environment."""
    script = Path(sys.executable).with_name("hpcpolicy")
    return [str(script)] if script.exists() else [
        sys.executable, "-c", "from hpcpolicy.commands import main; main()"]


def train_until(args: list[str], deadline_s: float | None) -> float:
    """Run ``hpcpolicy train ARGS``; Ctrl-C it (its whole process group) at the deadline.

    Returns the wall time. The trainer answers SIGINT by finishing the update, checkpointing
    and exporting the policy, as after a Ctrl-C in a terminal.
    """
    start = time.perf_counter()
    proc = subprocess.Popen([*hpcpolicy_cli(), "-q", "train", *args], start_new_session=True)
    try:
        proc.wait(timeout=deadline_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGINT)
        proc.wait()
    if proc.returncode != 0:
        raise SystemExit(f"hpcpolicy train {' '.join(args)} failed (exit {proc.returncode})")
    return time.perf_counter() - start
