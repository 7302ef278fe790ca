"""``hpcpolicy demo``: its steps, its files, and an end-to-end run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from typer.testing import CliRunner

import hpcpolicy.generate
from hpcpolicy.commands import app
from hpcpolicy.demo import DEMO_STEPS, DemoConfig, DemoContext, DemoStep, run_demo
from hpcpolicy.errors import ConfigError, InputFormatError
from hpcpolicy.ingest import pipeline

DATA = Path(__file__).resolve().parent / "data"


def test_config_is_checked_field_by_field(tmp_path: Path) -> None:
    for field, value in (("jobs", 0), ("procs", 0), ("seed", -1), ("model", "poisson"),
                         ("train_steps", -1)):
        bad: dict[str, Any] = {field: value}
        with pytest.raises(ConfigError, match=rf"^{field} "):
            DemoConfig(out_dir=tmp_path, **bad)
    a_file = tmp_path / "f"
    a_file.write_text("")
    with pytest.raises(ConfigError, match=r"out_dir .* is a file"):
        DemoConfig(out_dir=a_file)
    assert DemoConfig(out_dir=str(tmp_path)).out_dir == tmp_path  # type: ignore[arg-type]


def test_the_demo_is_generate_ingest_stats_compare_train_whatif() -> None:
    assert [s.name for s in DEMO_STEPS] == ["generate", "ingest", "stats", "compare", "train",
                                            "whatif"]


def _step(name: str, log: list[str]) -> DemoStep:
    def run(ctx: DemoContext) -> str:
        log.append(name)
        path = ctx.cfg.out_dir / f"{name}.txt"
        path.write_text(f"{name} after {sorted(ctx.results)}")
        ctx.files[name] = path
        return f"{name}-result"
    return DemoStep(name, f"do {name}", run)


def test_steps_run_in_order_share_context_and_are_recorded(tmp_path: Path) -> None:
    log: list[str] = []
    events: list[tuple[Any, ...]] = []
    cfg = DemoConfig(out_dir=tmp_path / "d", jobs=10, seed=4)
    ctx = run_demo(cfg, [_step("a", log), _step("b", log)],
                   on_start=lambda i, n, s: events.append(("start", i, n, s.name)),
                   on_done=lambda i, n, s, sec: events.append(("done", i, n, s.name, sec >= 0)))
    assert log == ["a", "b"]
    assert events == [("start", 0, 2, "a"), ("done", 0, 2, "a", True),
                      ("start", 1, 2, "b"), ("done", 1, 2, "b", True)]
    assert ctx.results == {"a": "a-result", "b": "b-result"}
    assert (tmp_path / "d" / "b.txt").read_text() == "b after ['a']"
    record = json.loads((tmp_path / "d" / "demo.json").read_text())
    assert record == {
        "config": {"out_dir": str(tmp_path / "d"), "jobs": 10, "procs": 256, "seed": 4,
                   "model": "lublin", "train_steps": 250_000},
        "steps": ["a", "b"],
        "files": {"a": str(tmp_path / "d" / "a.txt"), "b": str(tmp_path / "d" / "b.txt")},
    }
    assert list(ctx.files) == ["a", "b", "record"]


def test_a_failing_step_stops_the_demo(tmp_path: Path) -> None:
    log: list[str] = []

    def broken(ctx: DemoContext) -> None:
        raise InputFormatError("workload.swf: line 3: broken on purpose")

    steps = [_step("a", log), DemoStep("broken", "break", broken), _step("c", log)]
    with pytest.raises(InputFormatError, match="on purpose"):
        run_demo(DemoConfig(out_dir=tmp_path), steps)
    assert log == ["a"] and not (tmp_path / "demo.json").exists()


def _fake_generator(path: Path, *, model: str = "lublin", jobs: int = 5000, procs: int = 256,
                    seed: int = 0) -> Path:
    """Stands in for the Lublin generator: ``jobs`` jobs of the fake reader's format, one
    submitted every 10 minutes, plus one step row per job and one unreadable row."""
    lines = ["# fake workload"]
    for i in range(1, jobs + 1):
        cpus = 1 + (i * 7 + seed) % procs
        lines += [f"{i},{1_700_000_000 + 600 * i},{60 * i},{cpus},job",
                  f"{i}.batch,{1_700_000_000 + 600 * i},{60 * i},{cpus},step"]
    lines.append("999999,yesterday,1,1,job")
    Path(path).write_text("\n".join(lines) + "\n")
    return Path(path)


@pytest.fixture
def fake_generate_and_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """The demo's generator and SWF reader replaced by fakes (see tests/data)."""
    monkeypatch.setattr(hpcpolicy.generate, "generate_swf", _fake_generator, raising=False)
    monkeypatch.syspath_prepend(str(DATA))
    monkeypatch.setitem(pipeline.READERS, "swf", "pipeline_fake_reader:plan_fake")


def _check_demo_folder(out: Path, jobs: int) -> dict[str, Any]:
    names = {"workload.swf", "jobs.parquet", "jobs.rejects.parquet", "jobs.ingest.json",
             "stats.json", "compare.json", "demo.json"}
    assert names <= {p.name for p in out.iterdir()}
    assert not [p for p in out.iterdir() if p.name.endswith(".part")]
    report: dict[str, Any] = json.loads((out / "jobs.ingest.json").read_text())
    assert report["rows_read"] == (report["jobs_kept"] + report["rows_rejected"]
                                   + report["steps_folded"])
    assert pl.read_parquet(out / "jobs.parquet").height == report["jobs_kept"]
    assert pl.read_parquet(out / "jobs.rejects.parquet").height == report["rows_rejected"]
    stats = json.loads((out / "stats.json").read_text())
    assert stats["jobs"] == report["jobs_kept"]
    assert stats["load"]["machine_procs"] is not None
    compare = json.loads((out / "compare.json").read_text())
    runs = [(r["config"]["policy"], r["config"]["backfill"]) for r in compare["runs"]]
    assert runs == [(p, b) for p in ("fcfs", "sjf", "f1") for b in ("none", "easy")]
    assert {r["summary"]["jobs"] for r in compare["runs"]} == {report["jobs_kept"]}
    whatif = json.loads((out / "report" / "report.json").read_text())
    assert {"report.html", "report.md", "outcomes.parquet"} <= {
        p.name for p in (out / "report").iterdir()}
    assert [r["spec"] for r in whatif["runs"][:3]] == ["fcfs+easy", "sjf+easy", "f1+easy"]
    # the what-if replays agree with the comparison of the same policies
    easy = {r["config"]["policy"]: r["summary"] for r in compare["runs"]
            if r["config"]["backfill"] == "easy"}
    # (but utilisation: the report's is the comparisons', until the last submit)
    def but_utilization(summary: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in summary.items() if k != "utilization"}

    assert [but_utilization(r["summary"]) for r in whatif["runs"][:3]] == [
        but_utilization(easy[p]) for p in ("fcfs", "sjf", "f1")]
    return report


@pytest.mark.usefixtures("fake_generate_and_read")
def test_demo_generates_ingests_and_profiles(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    ctx = run_demo(DemoConfig(out_dir=out, jobs=40, procs=16, seed=1, train_steps=0))
    report = _check_demo_folder(out, 40)
    assert (report["rows_read"], report["jobs_kept"], report["steps_folded"],
            report["rows_rejected"]) == (81, 40, 40, 1)
    assert ctx.results["stats"]["load"]["machine_procs"] == 64  # the fake reader's header
    assert sorted(ctx.files) == ["compare", "ingest_report", "jobs", "record", "rejects",
                                 "report_html", "report_json", "report_markdown",
                                 "report_outcomes", "stats", "workload"]


@pytest.mark.slow  # over the ten-minute budget of the default suite; run with -m slow
@pytest.mark.usefixtures("fake_generate_and_read")
def test_demo_rerun_replaces_its_outputs(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    run_demo(DemoConfig(out_dir=out, jobs=40, seed=1, train_steps=0))
    first = {name: (out / name).read_bytes() for name in ("stats.json", "report/report.html")}
    run_demo(DemoConfig(out_dir=out, jobs=25, seed=1, train_steps=0))
    assert json.loads((out / "stats.json").read_text())["jobs"] == 25
    run_demo(DemoConfig(out_dir=out, jobs=40, seed=1, train_steps=0))
    assert {name: (out / name).read_bytes() for name in first} == first


@pytest.mark.usefixtures("fake_generate_and_read")
def test_demo_command_shows_progress_stats_and_files(tmp_path: Path) -> None:
    out = tmp_path / "d"
    result = CliRunner().invoke(app, ["demo", "-o", str(out), "--jobs", "30", "--seed", "2",
                                      "--train-steps", "0"])
    assert result.exit_code == 0, result.output
    for text in ("[1/6] generate", "[3/6] profile", "[4/6] replay", "[6/6] write a what-if",
                 "workload profile", "simulate (whole workload)", "30 jobs kept", "stats.json",
                 "compare.json", "demo.json", "verdict:", "open the report:", "report.html"):
        assert text in result.stdout, text
    quiet = CliRunner().invoke(app, ["-q", "demo", "-o", str(out), "--jobs", "30",
                                     "--train-steps", "0"])
    assert quiet.exit_code == 0, quiet.output
    printed = quiet.stdout.split()
    assert str(out / "stats.json") in printed and all(Path(p).exists() for p in printed)


def test_demo_with_the_real_swf_reader(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """generate (a stand-in copying tests/data/stats_tiny.swf) -> real SWF ingest -> stats."""
    tiny = DATA / "stats_tiny.swf"

    def copy_tiny(path: Path, **_: Any) -> Path:
        Path(path).write_bytes(tiny.read_bytes())
        return Path(path)

    monkeypatch.setattr(hpcpolicy.generate, "generate_swf", copy_tiny, raising=False)
    out = tmp_path / "demo"
    ctx = run_demo(DemoConfig(out_dir=out, jobs=8, procs=16, train_steps=0))
    report = _check_demo_folder(out, 8)
    assert (report["rows_read"], report["jobs_kept"], report["rows_rejected"]) == (8, 8, 0)
    stats = ctx.results["stats"]
    # jobs 1..8 of the fixture: cpus x run time, summed by hand
    core_s = 4 * 600 + 8 * 300 + 16 * 3600 + 1 * 30 + 2 * 900 + 4 * 1800 + 16 * 60 + 8 * 120
    assert stats["load"]["core_hours"] == round(core_s / 3600, 2)
    assert stats["arrivals"]["time_zone"] == "Europe/Stockholm"
    assert list(stats["states"].items()) == [("completed", 6), ("failed", 1), ("cancelled", 1)]


def test_demo_end_to_end_with_the_real_generator_and_reader(tmp_path: Path) -> None:
    """The README's main command, small: Lublin workload -> job table -> profile -> compare ->
    a short training -> what-if with the trained policy; a rerun gives the same files (only
    the ingest report's timings differ)."""
    out = tmp_path / "demo"
    args = ["demo", "-o", str(out), "--jobs", "300", "--seed", "5", "--train-steps", "1024"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    report = _check_demo_folder(out, 300)
    assert report["jobs_kept"] + report["rows_rejected"] == 300
    assert report["steps_folded"] == 0
    stats = json.loads((out / "stats.json").read_text())
    assert stats["load"]["machine_procs"] == 256  # the generator's MaxProcs, via the header
    whatif = json.loads((out / "report" / "report.json").read_text())
    assert whatif["runs"][3]["spec"] == f"{out / 'run' / 'policy'}+easy"
    # the policy folder `hpcpolicy train` leaves: the model card, bound to its model
    card = json.loads((out / "run" / "policy" / "card.json").read_text())
    assert card["format"] == "hpcpolicy.model-card" and "binding" in card
    same = ("workload.swf", "jobs.parquet", "jobs.rejects.parquet", "stats.json", "demo.json",
            "report/report.json", "report/report.html", "report/report.md")
    before = {name: (out / name).read_bytes() for name in same}
    assert CliRunner().invoke(app, args).exit_code == 0
    assert {name: (out / name).read_bytes() for name in same} == before


def test_the_demo_trains_where_the_heuristics_tie(tmp_path: Path) -> None:
    """On a machine where no queue forms, ``hpcpolicy train`` stops (nothing to learn); the
    demo, which shows the whole flow on any generated load, trains anyway, and the card's guard
    says what is deployed."""
    pytest.importorskip("torch")
    from env_jobs import write_table

    from benchmarks.builders.job_tables import write_job_table

    jobs = pl.read_parquet(write_table(tmp_path / "busy.parquet", 300))
    table = write_job_table(tmp_path / "jobs.parquet", jobs, [{"MaxProcs": 100_000}])
    ctx = DemoContext(DemoConfig(out_dir=tmp_path / "demo", jobs=40, train_steps=256))
    ctx.files["jobs"] = table
    next(step for step in DEMO_STEPS if step.name == "train").run(ctx)
    card = json.loads((ctx.files["policy"] / "card.json").read_text())
    assert {s["mean_bsld"] for s in card["validation"]["scores"]} == {1.0}  # a tie
    assert card["guard"] is not None
