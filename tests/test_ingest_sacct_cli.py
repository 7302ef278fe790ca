"""Bad sacct input through ``hpcpolicy ingest``: one clean line and exit 1, or rejects with
reasons and exit 0; never a traceback, never a partial output file."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest
from conftest import DATA
from typer.testing import CliRunner

from hpcpolicy.commands import app

QUIRKS = DATA / "sacct_quirks.txt"


def _run(tmp_path: Path, *args: str):
    result = CliRunner().invoke(app, ["ingest", *args, "-o", str(tmp_path / "out.parquet")])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result


def _outputs(tmp_path: Path) -> list[str]:
    return sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("out"))


def _big_export() -> bytes:
    header = QUIRKS.read_text().split("\n")[0]
    rows = "".join(f"{i}|{i}|x|u|g|a|p|q|2024-03-01T10:00:00||||||COMPLETED|0:0|1|1|1|1|1G|||\n"
                   for i in range(1000, 30000))
    return f"{header}\n{rows}".encode()


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("empty.txt", b"", "the file is empty"),
        ("blank.txt", b"\n\n  \n", "the file is empty"),
        ("garbage.bin", bytes(range(256)) * 8, "looks like a binary file"),
        ("semi.txt", QUIRKS.read_bytes().replace(b"|", b";"),
         "the header is separated by ';'"),
        ("tabs.txt", QUIRKS.read_bytes().replace(b"|", b"\t"), "the header is separated by tabs"),
        ("nosubmit.txt", b"JobID|State\n1|COMPLETED\n", "column Submit missing"),
        ("noheader.txt", b"1|2024-03-01T10:00:00|COMPLETED\n", "no header line"),
        ("badtime.txt", b"JobID|Submit|State\n" + b"".join(
            b"%d|yesterday|COMPLETED\n" % i for i in range(12)),
         ":2: column Submit holds 'yesterday'"),
        ("cut.txt.gz", gzip.compress(_big_export())[:40000], "truncated or damaged"),
        ("only_steps.txt", b"JobID|Submit|State\n1.batch|2024-03-01T10:00:00|COMPLETED\n",
         "100% of 1 rows rejected (orphan_step: 1)"),
    ],
)
def test_bad_input_is_one_clean_line(tmp_path: Path, name: str, content: bytes,
                                     message: str) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    result = _run(tmp_path, str(path), "--format", "sacct" if name == "tabs.txt" else "auto")
    assert result.exit_code == 1, result.output
    out = result.output.strip()
    assert out.startswith("error: ") and message in out, out
    assert "Traceback" not in out and len(out.splitlines()) == 1
    assert _outputs(tmp_path) == []


def test_mostly_broken_rows_refused_without_output(tmp_path: Path) -> None:
    path = tmp_path / "shifted.txt"
    lines = QUIRKS.read_text().split("\n")
    path.write_text(lines[0] + "\n" + "".join(f"{ln}|extra\n" for ln in lines[1:] if ln))
    result = _run(tmp_path, str(path))
    assert result.exit_code == 1
    # the extra field is joined into JobName, so the rows fail on their shifted times
    assert "100% of 21 rows rejected (bad_timestamp" in result.output
    assert "--max-reject-fraction" in result.output
    assert _outputs(tmp_path) == []


def test_bad_rows_are_rejects_with_reasons(tmp_path: Path) -> None:
    result = _run(tmp_path, str(QUIRKS))
    assert result.exit_code == 0, result.output
    for text in ("rows read", "28", "field_count", "duplicate_superseded", "orphan_step",
                 "end_before_start", "absurd_value", "bad_timestamp", "sacct_array_grouped"):
        assert text in result.output
    assert _outputs(tmp_path) == ["out.ingest.json", "out.parquet", "out.rejects.parquet"]


def test_non_utf8_and_quotes_and_pipes(tmp_path: Path) -> None:
    path = tmp_path / "names.txt"
    path.write_bytes(b"JobID|Submit|State|JobName\n"
                     b"1|2024-03-01T10:00:00|COMPLETED|say \"hi\"\n"
                     b"2|2024-03-01T10:00:00|COMPLETED|a|b\n"
                     b"3|2024-03-01T10:00:00|COMPLETED|caf\xe9\n"
                     b"4|2024-03-01T10:00:00|COMPLETED|plain\n")
    result = _run(tmp_path, str(path), "--max-reject-fraction", "0.6")
    assert result.exit_code == 0, result.output
    # JobName is the one free-text column: "a|b" is read back as the name (issue 28)
    assert "sacct_name_rejoined" in result.output and "non_utf8" in result.output
    assert "field_count" not in result.output


def test_header_less_export_through_sacct_columns(tmp_path: Path) -> None:
    lines = (DATA / "sacct_quirks.txt").read_text().split("\n")
    path = tmp_path / "noheader.txt"
    path.write_text("\n".join(lines[1:]))
    refused = _run(tmp_path, str(path), "--format", "sacct")
    assert refused.exit_code == 1 and "--sacct-columns" in refused.output
    columns = ",".join(lines[0].split("|"))
    result = _run(tmp_path, str(path), "--format", "sacct", "--sacct-columns", columns)
    assert result.exit_code == 0, result.output
    assert (tmp_path / "out.parquet").exists()


def test_sacct_columns_must_be_distinct(tmp_path: Path) -> None:
    result = _run(tmp_path, str(DATA / "sacct_quirks.txt"), "--sacct-columns", "JobID,JobID")
    assert result.exit_code == 1 and "distinct" in result.output


def test_help_example_exports_every_users_jobs_over_a_period() -> None:
    """The export example in ``ingest --help`` names all users, every record and a start and
    an end date: taken literally, ``sacct`` alone exports only the caller's jobs of today."""
    result = CliRunner().invoke(app, ["ingest", "--help"], env={"COLUMNS": "200"})
    text = " ".join(result.output.split())
    assert "sacct --allusers --duplicates --parsable2 -S 2024-01-01 -E now --format=" in text
