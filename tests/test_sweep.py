"""``hpcpolicy sweep``: a grid of 2 logs x 2 candidates x 2 scenarios gives the figures of the
eight ``whatif`` runs it stands for, cell for cell; a rerun skips finished cells; a bad spec
is one line naming the file and the key."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from cli_helpers import invoke, one_line_error

GRID = """logs = ["g1.parquet", "g2.parquet"]
candidates = ["sjf+easy", "f1+easy"]
scenarios = ["as-logged", "nodes=+10%"]
seeds = [4]
period_s = 86400
bootstrap = 100
walltime_fallback = "runtime"
"""


@pytest.fixture(scope="module")
def grid(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two small generated logs and the spec of their grid."""
    folder = tmp_path_factory.mktemp("sweep")
    for seed in (1, 2):
        swf = folder / f"g{seed}.swf"
        assert invoke("generate", "--jobs", "300", "--procs", "64", "--seed", str(seed),
                      "-o", str(swf)).exit_code == 0
        done = invoke("ingest", str(swf), "-o", str(folder / f"g{seed}.parquet"))
        assert done.exit_code == 0, done.output
    (folder / "grid.toml").write_text(GRID)
    (folder / "small.toml").write_text(GRID.replace('"g1.parquet", "g2.parquet"', '"g2.parquet"')
                                       .replace('"sjf+easy", "f1+easy"', '"f1+easy"'))
    return folder / "grid.toml"


def _figures(doc: dict[str, Any]) -> dict[str, Any]:
    """Every figure of a report: runs, scenarios and comparisons (not the input's path)."""
    return {key: doc[key] for key in ("config", "scenarios", "runs", "comparisons", "verdict",
                                      "fidelity", "timeseries")}


@pytest.mark.parametrize("name", [
    "small.toml",  # 1 log x 1 candidate x 2 scenarios, in the default suite (about 20 s)
    pytest.param("grid.toml", marks=pytest.mark.slow),  # 2 x 2 x 2, about 80 s
])
def test_a_sweep_gives_the_figures_of_the_whatif_runs_it_stands_for(grid: Path, name: str,
                                                                   tmp_path: Path) -> None:
    out, spec = tmp_path / "sw", grid.with_name(name)
    cells = 8 if name == "grid.toml" else 2
    result = invoke("sweep", str(spec), "-o", str(out))
    assert result.exit_code == 0, result.output
    assert f"{cells} cell(s) compared, 0 already done" in result.output
    table = pl.read_parquet(out / "sweep.parquet")
    assert table.height == cells
    for i, row in enumerate(table.iter_rows(named=True)):
        args = ["-c", row["candidate"], "--seed", "4", "--period", "1d", "--bootstrap", "100",
                "--walltime-fallback", "runtime", "-o", str(tmp_path / f"w{i}")]
        if row["scenario"] != "as-logged":
            args += ["-s", row["scenario"]]
        alone = invoke("whatif", row["log"], *args)
        assert alone.exit_code == 0, alone.output
        mine = json.loads((out / row["report"] / "report.json").read_text())
        theirs = json.loads((tmp_path / f"w{i}" / "report.json").read_text())
        assert _figures(mine) == _figures(theirs), row["report"]
        assert sorted(p.name for p in (out / row["report"]).iterdir()) == \
            sorted(p.name for p in (tmp_path / f"w{i}").iterdir())
        (comparison,) = [c for c in theirs["comparisons"] if c["scenario"] == row["scenario"]]
        primary = next(m for m in comparison["metrics"] if m["key"] == "mean_bsld")
        assert row["verdict"] == comparison["verdict"]
        assert [row[k] for k in ("baseline", "candidate_value", "ci_low", "ci_high")] == \
            [primary[k] for k in ("baseline", "candidate", "ci_low", "ci_high")]
    assert [(Path(r["log"]).name, r["candidate"], r["scenario"]) for r in
            table.iter_rows(named=True)][-2:] == [("g2.parquet", "f1+easy", "as-logged"),
                                                  ("g2.parquet", "f1+easy", "nodes=+10%")]
    markdown = (out / "sweep.md").read_text().splitlines()
    assert len([line for line in markdown if line.startswith("| g")]) == cells

    # a rerun skips the finished cells; a removed cell is compared again, to the same figures
    before = (out / "sweep.parquet").read_bytes()
    shutil.rmtree(out / table["report"][-1])
    again = invoke("sweep", str(spec), "-o", str(out))
    assert again.exit_code == 0, again.output
    assert f"1 cell(s) compared, {cells - 1} already done" in again.output
    assert pl.read_parquet(out / "sweep.parquet").equals(pl.read_parquet(io.BytesIO(before)))

    # the same folder with other settings is refused, naming what differs
    other = tmp_path / "other.toml"
    other.write_text(spec.read_text().replace("bootstrap = 100", "bootstrap = 50")
                     .replace('"g', f'"{grid.parent}/g'))
    line = one_line_error(invoke("sweep", str(other), "-o", str(out)))
    assert "holds a report made with other settings (bootstrap)" in line


@pytest.mark.parametrize(("text", "message"), [
    ("logs = [\n", "not valid TOML"),
    ('logs = ["g1.parquet"]\ncandidates = ["sjf+easy"]\nwindow = 3\n',
     "sweep config: unknown field(s) window"),
    ('logs = "g1.parquet"\ncandidates = ["sjf+easy"]\n',
     "sweep config field `logs`: must be a list of strings"),
    ('logs = ["g1.parquet"]\ncandidates = ["sjf+easy"]\nscenarios = ["nodes=lots"]\n',
     "sweep config field `scenarios`: scenario 'nodes=lots'"),
    ('logs = ["g1.parquet"]\ncandidates = ["fcfs+easy"]\n',
     "sweep config field `candidates`: candidate fcfs+easy is the baseline itself"),
    ('logs = ["g1.parquet"]\ncandidates = []\n', "sweep config field `candidates`: must list"),
    ('logs = ["nowhere.parquet"]\ncandidates = ["sjf+easy"]\n',
     "key `logs`: {dir}/nowhere.parquet is not a file"),
])
def test_a_bad_spec_is_one_line_naming_the_file_and_key(grid: Path, tmp_path: Path, text: str,
                                                        message: str) -> None:
    spec = grid.parent / "bad.toml"
    spec.write_text(text)
    line = one_line_error(invoke("sweep", str(spec), "-o", str(tmp_path / "s")))
    assert line.startswith(f"error: {spec}: ")
    assert message.format(dir=grid.parent) in line
    assert not (tmp_path / "s").exists()
