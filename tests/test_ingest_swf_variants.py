"""SWF as it comes (issue 41): extra trailing columns, hashed ids, no header.

Each variant is a small fixture in ``tests/data/``; the expected values are read off the
fixtures' text by hand. The rule that tells an extended file from a damaged one is in
:mod:`hpcpolicy.ingest.swf.columns`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from conftest import DATA

from hpcpolicy.ingest import IngestConfig, ingest, output_paths
from hpcpolicy.ingest.detect import detect_format
from hpcpolicy.ingest.swf.reader import plan_swf

EXTRA = DATA / "swf_extra_columns.swf"
HASHED = DATA / "swf_hashed_ids.swf"
NO_HEADER = DATA / "swf_no_header.swf"
LINE = "{n} 0 0 10 4 -1 -1 4 10 -1 1 1 1 -1 1 1 -1 -1"


def _data_lines(path: Path) -> list[str]:
    return [ln for ln in path.read_text().splitlines() if ln.strip() and ln[0] != ";"]


def _ingest(path: Path, tmp: Path, **cfg: Any) -> tuple[pl.DataFrame, pl.DataFrame, Any]:
    out = tmp / f"{path.name}.parquet"
    ingest([path], out, IngestConfig(**cfg))
    paths = output_paths(out)
    report = json.loads(paths["report"].read_text())
    return pl.read_parquet(paths["jobs"]), pl.read_parquet(paths["rejects"]), report


def _reasons(path: Path) -> dict[int, str | None]:
    frame = plan_swf(path, IngestConfig(format="swf")).frame
    return dict(frame.select("_line", "_reason").collect().rows())


# --- extra trailing columns ----------------------------------------------------------------

@pytest.mark.parametrize("fmt", ["auto", "swf"])
def test_extra_columns_are_detected_counted_and_nothing_is_lost(tmp_path: Path,
                                                                fmt: str) -> None:
    jobs, rejects, report = _ingest(EXTRA, tmp_path, format=fmt)
    assert report["inputs"][0]["format"] == "swf"
    assert jobs.height == len(_data_lines(EXTRA)) == 6 and rejects.height == 0
    assert report["inputs"][0]["inferred"]["extra_columns"]["value"] == 3
    assert any("3 columns after SWF field 18" in n for n in report["notes"]), report["notes"]
    job3 = jobs.filter(pl.col("job_id") == "3").row(0, named=True)
    assert (job3["run_time_s"], job3["req_cpus"], job3["state"], job3["group"],
            job3["qos"]) == (3600, 16, "failed", "2", "2")


def test_header_less_extended_file_is_recognised(tmp_path: Path) -> None:
    path = tmp_path / "bare.swf"
    path.write_text("".join(ln + "\n" for ln in _data_lines(EXTRA)))
    assert detect_format(path) == "swf"


def test_extended_file_still_rejects_short_and_non_numeric_lines(tmp_path: Path) -> None:
    path = tmp_path / "wide.swf"
    wide = [LINE.format(n=n) + " n[1-4] batch" for n in range(1, 6)]
    path.write_text("\n".join([*wide,
                               LINE.format(n=6),  # exactly 18: kept
                               " ".join(LINE.format(n=7).split()[:17]),  # 17 fields
                               LINE.format(n=8).replace(" 10 -1 1 ", " ten -1 1 ", 1) + " x y",
                               LINE.format(n=9) + " one two three"]) + "\n")
    assert _reasons(path) == {1: None, 2: None, 3: None, 4: None, 5: None, 6: None,
                              7: "field_count", 8: "bad_number", 9: None}


def test_bytes_that_are_not_utf8_in_an_extra_column_lose_no_job(tmp_path: Path) -> None:
    path = tmp_path / "latin1.swf"
    path.write_bytes(b"".join(LINE.format(n=n).encode() + b" caf\xe9 batch\n" for n in (1, 2))
                     + LINE.format(n=3).encode().replace(b" 4 ", b" 4\xe9 ", 1) + b" x y\n")
    assert _reasons(path) == {1: None, 2: None, 3: "non_utf8"}


def test_one_odd_wide_line_in_a_standard_file_stays_a_field_count_reject(tmp_path: Path) -> None:
    path = tmp_path / "odd.swf"
    path.write_text("\n".join([LINE.format(n=1), LINE.format(n=2) + " 7", LINE.format(n=3),
                               LINE.format(n=4) + " x"]) + "\n")
    assert _reasons(path) == {1: None, 2: "field_count", 3: None, 4: "field_count"}
    assert "extra_columns" not in plan_swf(path, IngestConfig()).inferred


# --- hashed ids ------------------------------------------------------------------------------

def test_hashed_ids_of_14_to_18_digits_are_kept_exact_and_distinct(tmp_path: Path) -> None:
    jobs, rejects, _ = _ingest(HASHED, tmp_path)
    assert rejects.height == 0 and jobs.height == len(_data_lines(HASHED))
    fields = [ln.split() for ln in _data_lines(HASHED)]
    text = {k: [None if f[k] == "-1" else f[k] for f in fields] for k in (11, 12, 14, 15)}
    got = jobs.sort("job_id_raw")
    assert got["user"].to_list() == text[11]
    assert got["group"].to_list() == text[12]
    assert got["qos"].to_list() == text[14]
    assert got["partition"].to_list() == text[15]
    assert got["user"].n_unique() == 4


def test_an_id_of_more_than_18_digits_is_rejected_with_its_own_reason(tmp_path: Path) -> None:
    path = tmp_path / "long.swf"
    fields = LINE.format(n=2).split()
    fields[11] = "1234567890123456789"
    path.write_text(LINE.format(n=1) + "\n" + " ".join(fields) + "\n")
    assert _reasons(path) == {1: None, 2: "swf_long_id"}


# --- no header -------------------------------------------------------------------------------

def test_header_less_file_says_the_machine_size_is_unknown_and_how_to_give_it(
        tmp_path: Path) -> None:
    jobs, _, report = _ingest(NO_HEADER, tmp_path)
    assert jobs.height == len(_data_lines(NO_HEADER))
    sized = [n for n in report["notes"] if "machine size" in n]
    assert len(sized) == 1, report["notes"]
    assert "unknown" in sized[0] and "16 processors" in sized[0]
    assert "--procs N" in sized[0] and "--cluster FILE" in sized[0]


def test_no_processor_count_anywhere_still_gets_the_note(tmp_path: Path) -> None:
    path = tmp_path / "noprocs.swf"
    path.write_text(LINE.replace(" 4 ", " -1 ").format(n=1) + "\n")
    plan = plan_swf(path, IngestConfig())
    assert plan.inferred["MaxProcs"]["value"] is None
    sized = [n for n in plan.notes if "machine size" in n]
    assert len(sized) == 1 and "unknown" in sized[0] and "--cluster FILE" in sized[0], sized
