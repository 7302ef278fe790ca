"""A real log whose wait field is -1 throughout: ingest warns that the waits are unknown, and the
what-if report says why there is no fidelity without calling the log a model trace."""

from __future__ import annotations

import json
from pathlib import Path

from cli_helpers import invoke

DATA = Path(__file__).parent / "data"


def _without_waits(tmp_path: Path) -> Path:
    lines = []
    for line in (DATA / "stats_tiny.swf").read_text().splitlines():
        fields = line.split()
        if not line.startswith(";") and fields:
            fields[2] = "-1"
            line = " ".join(fields)
        lines.append(line)
    target = tmp_path / "nowait.swf"
    target.write_text("\n".join(lines) + "\n")
    return target


def test_ingest_warns_and_whatif_explains(tmp_path: Path) -> None:
    table = tmp_path / "nowait.parquet"
    result = invoke("ingest", str(_without_waits(tmp_path)), "-o", str(table))
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "warning: none of the 8 jobs has a start or wait time" in text
    report = json.loads((tmp_path / "nowait.ingest.json").read_text())
    assert any(n.startswith("warning: none of the 8 jobs") for n in report["notes"])
    out = tmp_path / "rep"
    wi = invoke("whatif", str(table), "-c", "sjf", "--period", "1h", "--bootstrap", "100",
                "-o", str(out))
    assert wi.exit_code == 0, wi.output
    fidelity = json.loads((out / "report.json").read_text())["fidelity"]
    assert not fidelity["available"]
    assert "model or synthetic" not in fidelity["reason"]
    assert "-1 throughout" in fidelity["reason"]


def test_a_log_with_waits_gets_no_such_warning(tmp_path: Path) -> None:
    result = invoke("ingest", str(DATA / "stats_tiny.swf"), "-o", str(tmp_path / "t.parquet"))
    assert result.exit_code == 0, result.output
    assert "start or wait time" not in result.output
