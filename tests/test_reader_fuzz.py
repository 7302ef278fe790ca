"""Mutated real-format lines through every reader never give a traceback, and every row is
accounted for (issue 28; the long run is ``benchmarks/fuzz_readers.py``)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchmarks.builders.reader_fuzz import FIXTURES, check_ingest, mutated_log, seed_from


@pytest.mark.parametrize("fmt", sorted(FIXTURES))
def test_mutated_lines_never_crash_a_reader(fmt: str) -> None:
    seed = seed_from(fmt, FIXTURES[fmt])
    folder = Path(tempfile.mkdtemp(prefix=f"fuzz-{fmt}-"))

    @settings(max_examples=8, deadline=None, derandomize=True,
              suppress_health_check=[HealthCheck.too_slow])
    @given(st.data())
    def run(data: st.DataObject) -> None:
        check_ingest(fmt, data.draw(mutated_log(seed)), folder)

    run()
