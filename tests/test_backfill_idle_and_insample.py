"""Why a trained policy can give bit-identical results with and without EASY, said in the
output; and what-if says when a candidate was trained on the same log, and with which
backfilling (issue 29 item 7).

EASY acts only when the head of the queue does not fit: it reserves the head's start and
backfills around it. A trained policy sees which waiting jobs fit now, and learns to choose
one of them; its head then always starts at once, so EASY never has a blocked head to work
around, and the runs are the same. Here a policy that always picks a fitting job stands for it.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from cli_helpers import invoke

from benchmarks.builders.job_tables import job_table, write_job_table
from hpcpolicy.cluster import ClusterSpec
from hpcpolicy.env.driver import head_scores
from hpcpolicy.policies.base import QueueView
from hpcpolicy.sim.types import SimConfig
from hpcpolicy.sim.windows import backfill_note, replay
from hpcpolicy.workload import Workload

ROWS = [{"submit": 30 * i, "wait": 0, "run_time_s": 200 + 97 * (i % 7),
         "req_cpus": (1, 4, 2, 3)[i % 4], "req_walltime_s": 1000, "user": f"u{i % 3}"}
        for i in range(40)]


class FitFirst:
    """Chooses the oldest waiting job that fits now, as a trained policy learns to."""

    name = "fit-first"

    def bind(self, *_: object) -> FitFirst:
        return self

    def scores(self, view: QueueView) -> np.ndarray:
        fits = np.flatnonzero(view.fits_now)
        return head_scores(view.jobs.shape[0], int(fits[0]) if fits.size else 0)


def test_a_policy_that_picks_fitting_jobs_is_unchanged_by_easy() -> None:
    w = Workload.from_table(job_table(ROWS))
    machine = ClusterSpec.homogeneous(4)
    runs = replay(w, machine, [SimConfig(policy="fit-first", backfill=b)
                               for b in ("none", "easy")], None,
                  simulate=_with(FitFirst()))
    assert np.array_equal(runs[0].windows[0].result.start, runs[1].windows[0].result.start)
    note = backfill_note(runs[1])
    assert note is not None and "fit-first+easy: backfilling started no job" in note
    assert backfill_note(runs[0]) is None
    fcfs = replay(w, machine, [SimConfig(policy="fcfs", backfill="easy")], None)
    assert backfill_note(fcfs[0]) is None  # FCFS leaves heads that do not fit: EASY acts


def _with(policy: FitFirst):  # type: ignore[no-untyped-def]
    from hpcpolicy.deploy.resolve import policy_simulator

    return policy_simulator({"fit-first": policy})  # type: ignore[dict-item]


def test_simulate_says_when_backfilling_never_acted(tmp_path: Path) -> None:
    """A machine so large that no head ever waits: EASY has nothing to do, and says so."""
    table = write_job_table(tmp_path / "jobs.parquet", job_table(ROWS), [{"MaxProcs": 64}])
    result = invoke("simulate", str(table), "-b", "easy")
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "fcfs+easy: backfilling started no job" in text


@pytest.fixture(scope="module")
def policy_dir(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    torch = pytest.importorskip("torch")
    pytest.importorskip("onnxruntime")
    from hpcpolicy.atomic import file_sha256
    from hpcpolicy.learn.export import export_policy
    from hpcpolicy.learn.networks import ActorCritic

    tmp = tmp_path_factory.mktemp("insample")
    table = write_job_table(tmp / "jobs.parquet", job_table(ROWS), [{"MaxProcs": 4}])
    torch.manual_seed(0)
    first, last = 1_709_294_400, 1_709_294_400 + 30 * 27  # job_tables.T0 + the first 28 jobs
    policy = export_policy(
        ActorCritic(7, 7), tmp / "policy", k=8, metrics={},
        config={"algo": "ppo", "seed": 0, "hidden": [16], "activation": "tanh"},
        provenance={"reward": "bsld",
                    "training_data": {"path": str(table), "sha256": file_sha256(table)},
                    "environment": {"backfill": "none"},
                    "split": {"part": "train", "train_frac": 0.7, "jobs": [0, 28],
                              "submit_s": [first, last]}})
    return table, policy


def test_whatif_says_the_candidate_was_trained_on_this_log(
        policy_dir: tuple[Path, Path], tmp_path: Path) -> None:
    table, policy = policy_dir
    out = tmp_path / "rep"
    result = invoke("whatif", str(table), "-c", f"{policy}+easy", "--period", "1h",
                    "--bootstrap", "100", "-o", str(out))
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "was trained on this same log" in text
    assert "in-sample" in text and "trained with backfilling none, compared here with easy" \
        in text
    notes = json.loads((out / "report.json").read_text())["notes"]
    assert any("in-sample" in n for n in notes)
    assert "in-sample" in (out / "report.html").read_text()
