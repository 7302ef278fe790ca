"""SIGKILL ``ingest``, ``whatif -o``, ``train`` and a policy export at random points, and check
that each leaves its outputs all old or all new, and nothing behind once the next run ends.

For each target an older output is made first; then, at each kill point, the command that
replaces it with a different output is started and SIGKILLed (its whole process group): for
half of the points after a delay uniform over the length of an uninterrupted run; for the
others once its first temporary file or build folder appears in the output folder, plus a
delay uniform over a quarter of that length (the files are then being written and renamed).
Then:

* the state is classified. ``journal``: the kill fell between the commit journal and the
  last rename (:mod:`hpcpolicy.atomic`); the renames are finished as any hpcpolicy reader
  would, then the files are classified. ``old`` / ``new``: every file of the set is the older
  or the newer output (checked by content: counts against the report, input hashes, the
  candidate named in each report file, hashes in a policy manifest). ``mixed``: anything else
  -- the failure this benchmark looks for;
* the next run of the same output (the older command again, or ``train --resume``) runs to
  its end, and the folder must then hold exactly the output files: no ``.NAME.*.part``, no
  ``.policy.*`` build folder, no journal.

Inputs: ``../shared/data/HPC2N-2002-2.2-cln.swf.gz`` (the newer ingest, 202,871 jobs) and
``KTH-SP2-1996-2.1-cln.swf.gz`` (the older ingest, and the what-if's table); ``train`` runs
PPO for a few hundred steps on ``tests/data/stats_tiny.swf``. Output: JSON (default
``benchmarks/results/kill_outputs.json``) and one line of text. Exit 1 on any ``mixed`` state
or leftover.

    python -m benchmarks.kill_outputs --kills 15 --seed 1             # every target
    python -m benchmarks.kill_outputs --target whatif --kills 15      # one target
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import polars as pl

from benchmarks._common import DATA, RESULTS, ROOT, TRACES
from benchmarks.cli import hpcpolicy_cli

TINY = ROOT / "tests" / "data" / "stats_tiny.swf"

_EXPORT = """
import sys, torch
from hpcpolicy.learn.export import export_policy
from hpcpolicy.learn.networks import ActorCritic
torch.manual_seed(int(sys.argv[2]))
export_policy(ActorCritic(7, 7), sys.argv[1], k=8, metrics={"mark": float(sys.argv[2])},
              config={"algo": "ppo", "seed": int(sys.argv[2]), "hidden": [64, 64],
                      "activation": "tanh"})
"""


def _run(args: list[str], timeout: float = 600) -> float:
    start = time.perf_counter()
    done = subprocess.run(args, capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed: {done.stderr[-2000:]}")
    return time.perf_counter() - start


def _killed(args: list[str], delay: float) -> bool:
    """Start ``args``, SIGKILL its process group after ``delay`` s; whether it was still
    running then."""
    proc = subprocess.Popen(args, cwd=ROOT, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        proc.wait(timeout=delay)
        return False
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        return True


def _killed_while_writing(args: list[str], folder: Path, extra: float) -> bool:
    """Start ``args``; once a temporary entry (``.NAME...``) appears in ``folder``, wait
    ``extra`` s more and SIGKILL its process group; whether it was still running then."""
    before = {p.name for p in folder.iterdir()} if folder.exists() else set()
    proc = subprocess.Popen(args, cwd=ROOT, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while proc.poll() is None:
        names = {p.name for p in folder.iterdir()} if folder.exists() else set()
        if any(n.startswith(".") for n in names - before):
            break
        time.sleep(0.005)
    try:
        proc.wait(timeout=extra)
        return False
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        return True


def _leftovers(folder: Path, expected: set[str]) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name not in expected)


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


class Target:
    """One command under test: its older and newer run, and how to read its state."""

    name: str
    folder: Path
    expected: set[str]

    def old(self) -> list[str]:
        raise NotImplementedError

    def new(self) -> list[str]:
        raise NotImplementedError

    def journal(self) -> Path | None:
        return None

    def state(self) -> str:
        raise NotImplementedError

    def after(self) -> list[str]:
        """The next run of the same output, run to its end."""
        return self.old()


class Ingest(Target):
    name = "ingest"

    def __init__(self, work: Path) -> None:
        self.folder = work / "ingest"
        self.folder.mkdir()
        self.out = self.folder / "t.parquet"
        self.expected = {"t.parquet", "t.rejects.parquet", "t.ingest.json"}
        self.inputs = {"old": DATA / TRACES["KTH-SP2"].file,
                       "new": DATA / TRACES["HPC2N"].file}

    def _cmd(self, which: str) -> list[str]:
        return [*hpcpolicy_cli(), "-q", "ingest", str(self.inputs[which]), "-o", str(self.out),
                "--overwrite"]

    def old(self) -> list[str]:
        return self._cmd("old")

    def new(self) -> list[str]:
        return self._cmd("new")

    def journal(self) -> Path:
        from hpcpolicy.atomic import journal_for

        return journal_for(self.out)

    def state(self) -> str:
        from hpcpolicy.table import open_job_table

        table = open_job_table(self.out)  # finishes an interrupted commit, as readers do
        report = json.loads((self.folder / "t.ingest.json").read_text())
        jobs = table.frame.select(pl.len()).collect().item()
        rejects = pl.read_parquet(self.folder / "t.rejects.parquet").height
        sources = json.loads(table.metadata["sources"])
        consistent = (jobs == report["jobs_kept"] and rejects == report["rows_rejected"]
                      and [s["sha256"] for s in sources]
                      == [s["sha256"] for s in report["inputs"]])
        if not consistent:
            return "mixed"
        path = report["inputs"][0]["path"]
        return "old" if path == str(self.inputs["old"]) else "new"


class Whatif(Target):
    name = "whatif"

    def __init__(self, work: Path) -> None:
        self.folder = work / "whatif" / "rep"
        self.folder.parent.mkdir()
        self.table = work / "whatif" / "kth.parquet"
        _run([*hpcpolicy_cli(), "-q", "ingest", str(DATA / TRACES["KTH-SP2"].file),
              "-o", str(self.table)])
        self.expected = {"report.json", "report.md", "report.html", "outcomes.parquet"}

    def _cmd(self, candidate: str) -> list[str]:
        return [*hpcpolicy_cli(), "-q", "whatif", str(self.table), "-c", candidate,
                "--bootstrap", "200", "-o", str(self.folder), "--overwrite"]

    def old(self) -> list[str]:
        return self._cmd("sjf+easy")

    def new(self) -> list[str]:
        return self._cmd("f1+easy")

    def journal(self) -> Path:
        from hpcpolicy.atomic import journal_for

        return journal_for(self.folder / "report.json")

    def state(self) -> str:
        from hpcpolicy.atomic import finish_commit

        finish_commit(self.journal())
        kinds = set()
        for name in self.expected:
            path = self.folder / name
            if name == "outcomes.parquet":
                runs = set(pl.read_parquet(path)["run"].unique())
                kinds.add("new" if "as-logged/f1+easy" in runs else "old")
            else:  # Markdown escapes the + as \+
                text = path.read_bytes()
                kinds.add("new" if b"f1+easy" in text or b"f1\\+easy" in text else "old")
        return kinds.pop() if len(kinds) == 1 else "mixed"


class Export(Target):
    name = "export"

    def __init__(self, work: Path) -> None:
        self.folder = work / "export"
        self.folder.mkdir()
        self.target = self.folder / "policy"
        self.expected = {"policy"}

    def _cmd(self, mark: int) -> list[str]:
        return [sys.executable, "-c", _EXPORT, str(self.target), str(mark)]

    def old(self) -> list[str]:
        return self._cmd(1)

    def new(self) -> list[str]:
        return self._cmd(2)

    def state(self) -> str:
        from hpcpolicy.atomic import remove_leftovers

        if not self.target.exists():  # killed between the two renames, where no swap exists
            remove_leftovers(self.target)
        manifest = json.loads((self.target / "manifest.json").read_text())
        whole = all(_digest(self.target / f["path"]) == f["sha256"]
                    for f in manifest["files"].values())
        if not whole:
            return "mixed"
        return "new" if manifest["metrics"]["mark"] == 2.0 else "old"


class Train(Target):
    name = "train"

    def __init__(self, work: Path) -> None:
        self.folder = work / "train" / "run"
        self.folder.parent.mkdir()
        self.table = work / "train" / "t.parquet"
        _run([*hpcpolicy_cli(), "-q", "ingest", str(TINY), "-o", str(self.table)])
        self.expected = {"checkpoints", "config.json", "env.json", "metrics.csv", "policy",
                         "result.json"}
        self.steps = self.prev = 256

    def _cmd(self, steps: int, resume: bool) -> list[str]:
        return [*hpcpolicy_cli(), "-q", "train", str(self.table), "--algo", "ppo", "--steps",
                str(steps), "--window-size", "4", "--num-envs", "2", "-o", str(self.folder),
                *(["--resume"] if resume else [])]

    def old(self) -> list[str]:
        return self._cmd(self.steps, resume=self.folder.exists())

    def new(self) -> list[str]:
        self.prev, self.steps = self.steps, self.steps + 256
        return self._cmd(self.steps, resume=True)

    def after(self) -> list[str]:
        return self._cmd(self.steps, resume=True)

    def state(self) -> str:
        """Every file is whole (JSON parses, the checkpoint loads, the policy's hashes hold),
        and the policy and ``result.json`` are of one run: old or new by their steps."""
        import torch

        for name in ("config.json", "env.json"):
            json.loads((self.folder / name).read_text())
        torch.load(self.folder / "checkpoints" / "last.pt", weights_only=True)
        manifest = json.loads((self.folder / "policy" / "manifest.json").read_text())
        whole = all(_digest(self.folder / "policy" / f["path"]) == f["sha256"]
                    for f in manifest["files"].values())
        result = json.loads((self.folder / "result.json").read_text())
        steps = {int(manifest["metrics"]["global_step"]), int(result["global_step"])}
        if not whole or len(steps) != 1:
            return "mixed"
        return "new" if steps == {self.steps} else "old" if steps == {self.prev} else "mixed"


TARGETS: dict[str, Callable[[Path], Target]] = {
    "ingest": Ingest, "whatif": Whatif, "train": Train, "export": Export}


def kill_points(target: Target, kills: int, rng: random.Random) -> dict[str, object]:
    """Make the older output, time the newer run, then kill it ``kills`` times."""
    _run(target.old())
    length = _run(target.new())
    _run(target.after())
    states: Counter[str] = Counter()
    leftovers: list[list[str]] = []
    points = []
    for i in range(kills):
        if i % 2 == 0:
            delay = rng.uniform(0, length)
            was_running = _killed(target.new(), delay)
        else:  # while the files are written and renamed
            delay = rng.uniform(0, 0.25 * length)
            was_running = _killed_while_writing(target.new(), target.folder, delay)
        journal = target.journal()
        in_commit = journal is not None and journal.exists()
        state = target.state()
        states["journal" if in_commit else state] += 1
        if in_commit and state == "mixed":
            states["mixed"] += 1
        _run(target.after())
        left = _leftovers(target.folder, target.expected)
        if left:
            leftovers.append(left)
        points.append({"delay_s": round(delay, 2), "killed_running": was_running,
                       "state": "journal" if in_commit else state,
                       "after_finish": state, "left_after_next_run": left})
    return {"target": target.name, "kills": kills, "uninterrupted_s": round(length, 2),
            "states": dict(states), "mixed": states["mixed"],
            "runs_with_leftovers": len(leftovers), "points": points}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", choices=sorted(TARGETS), action="append",
                        help="only these (repeat); default all")
    parser.add_argument("--kills", type=int, default=15, help="kill points per target")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path,
                        default=RESULTS / "kill_outputs.json")
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    results = []
    with tempfile.TemporaryDirectory(prefix="kill-") as tmp:
        for name in args.target or sorted(TARGETS):
            results.append(kill_points(TARGETS[name](Path(tmp)), args.kills, rng))
            r = results[-1]
            print(f"  {name}: {r['kills']} kills, states {r['states']}, "
                  f"{r['runs_with_leftovers']} next runs left something", file=sys.stderr)
    bad = sum(int(r["mixed"]) + int(r["runs_with_leftovers"])  # type: ignore[call-overload]
              for r in results)
    doc = {"benchmark": "kill_outputs", "seed": args.seed, "results": results,
           "load_avg_end": os.getloadavg()}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=2) + "\n")
    total = sum(int(r["kills"]) for r in results)  # type: ignore[call-overload]
    states = "; ".join(f"{r['target']} {r['states']}" for r in results)
    print(f"kill_outputs: {total} kill points ({states}); {bad} mixed states or leftovers "
          f"-> {args.out}")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
