"""Small files that describe huge inputs end in one line, read within bounds (issue 38).

Each bomb of ``benchmarks/builders/input_bombs.py`` is built here just past the limit it tests
(a few MiB at most, or with the limit lowered), so the module stays cheap;
``benchmarks/input_bombs.py``
builds them at the sizes of the issue's findings and measures peak memory and time.
"""

from __future__ import annotations

import re
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import invoke, one_line_error

from benchmarks.builders.input_bombs import BOMBS, SWF_HEAD, SWF_LINE, write_stream
from hpcpolicy.errors import ConfigError, InputFormatError

MIB = 1 << 20
DATA = Path(__file__).parent / "data"


@pytest.mark.parametrize(("bomb", "size", "message"), [
    ("csv_gz_field", 2 * MIB, r"field\.csv\.gz: line 3 is longer than 1,048,576 bytes: not a "
     r"line of a Helios job log \(cluster_log\.csv\) \(binary data\?\); raise --max-line-bytes "
     r"if it is one$"),
    ("helios_field", 2 * MIB, r"field\.csv: line 3 is longer than 1,048,576 bytes"),
    ("swf_gz_line", 2 * MIB, r"line\.swf\.gz: line 4 is longer than 1,048,576 bytes: not a "
     r"line of an SWF text log"),
    ("swf_zeros", 3 * MIB, r"zeros\.swf: line 1 is longer than 1,048,576 bytes"),
    ("sacct_columns", 1500, r"wide\.txt: line 1: the header names 1,500 columns, more than the "
     r"1,000 allowed; .*raise --max-columns"),
    ("csv_long_header", 70_000, r"wide\.csv: line 1: the header is longer than 64,000 bytes "
     r".*raise --max-columns"),
    ("cluster_groups", 300, r"groups\.toml: 300 node groups, more than the 256 a cluster spec "
     r"may have; .*set HPCPOLICY_MAX_CLUSTER_GROUPS"),
])
def test_bomb_ends_in_one_line(tmp_path: Path, bomb: str, size: int, message: str) -> None:
    line = one_line_error(invoke(*BOMBS[bomb](tmp_path, size)))
    assert re.search(message, line), line


def test_gzip_that_expands_too_much_is_refused(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    from hpcpolicy import limits

    monkeypatch.setattr(limits, "GZIP_FLOOR_BYTES", MIB)  # the ratio checked past 1 MiB
    args = BOMBS["swf_gz_ratio"](tmp_path, 4 * MIB)
    line = one_line_error(invoke(*args))
    assert "ratio.swf.gz: the gzip data expands more than 100 times" in line
    assert "raise --max-gzip-ratio if it really is one" in line
    # one job repeated: all but one are duplicates, so the reject check is off here
    assert invoke(*args, "--max-gzip-ratio", "1000", "--max-reject-fraction", "1").exit_code == 0


def test_a_raised_line_limit_keeps_the_long_field(tmp_path: Path) -> None:
    args = BOMBS["helios_field"](tmp_path, 2 * MIB)
    assert invoke(*args, "--max-line-bytes", str(3 * MIB)).exit_code == 0


def test_a_raised_line_limit_reads_a_long_sacct_line(tmp_path: Path) -> None:
    """The sacct scanner's output buffer grows with the limit (it stalled on a line longer
    than a sixth of it)."""
    rows = (DATA / "sacct_slurm_tiny.txt").read_bytes().split(b"\n")
    long = rows[1].replace(b"|j101|", b"|" + b"n" * (3 * MIB) + b"|", 1)
    log = write_stream(tmp_path / "long.txt", [b"\n".join([*rows[:4], long, *rows[4:]])])
    result = invoke("ingest", str(log), "-o", str(tmp_path / "o.parquet"),
                    "--max-line-bytes", str(4 * MIB))
    assert result.exit_code == 0, result.output


def test_a_raised_column_limit_reads_the_wide_header(tmp_path: Path) -> None:
    result = invoke(*BOMBS["sacct_columns"](tmp_path, 1500), "--max-columns", "2000")
    assert result.exit_code == 0, result.output


def test_every_line_is_held_to_the_limit_not_only_endless_ones(tmp_path: Path) -> None:
    """A line between the limit and the 8 MiB piece used to pass."""
    from hpcpolicy.ingest.text_chunks import LineChunks
    from hpcpolicy.limits import Limits

    log = write_stream(tmp_path / "t.swf", [b"x" * 100, b"\n", b"y" * 101, b"\nz\n"])
    with pytest.raises(InputFormatError, match=r"t\.swf: line 2 is longer than 100 bytes"):
        list(LineChunks(log, "a test log", limits=Limits(line_bytes=100)).pieces())
    ok = write_stream(tmp_path / "ok.swf", [b"x" * 100, b"\n", b"z"])
    pieces = LineChunks(ok, "a test log", limits=Limits(line_bytes=100)).pieces()
    assert [bytes(buf[:end]) for buf, end in pieces] == [b"x" * 100 + b"\nz"]


def test_a_long_line_is_named_by_its_own_number_across_pieces(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from hpcpolicy.ingest import text_chunks

    monkeypatch.setattr(text_chunks, "CHUNK_BYTES", 4096)  # many pieces before the long line
    log = write_stream(tmp_path / "many.swf", [SWF_HEAD, SWF_LINE * 3000, b"9" * (2 * MIB)])
    line = one_line_error(invoke("ingest", str(log), "-o", str(tmp_path / "o.parquet")))
    assert "many.swf: line 3004 is longer than 1,048,576 bytes" in line


def test_the_swf_header_reader_reads_a_bounded_head(tmp_path: Path) -> None:
    from hpcpolicy.ingest.swf.header import read_header

    log = write_stream(tmp_path / "h.swf.gz", [SWF_HEAD, b";" + b"0" * (32 * MIB), b"\n"])
    tracemalloc.start()
    try:
        with pytest.raises(InputFormatError, match=r"h\.swf\.gz: line 4 is longer"):
            read_header(log)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 12 * MIB, f"{peak / MIB:.1f} MiB held to read the header"


def test_tables_read_whole_by_polars_are_read_within_the_limits(tmp_path: Path) -> None:
    """The GPU-sharing trace's node list went to Polars' read_csv, which decompresses a gzip
    file whole: 2.3 MB holding a 500 MB field took 1.7 GB."""
    from hpcpolicy.gpu.sharing import read_nodes

    bomb = write_stream(tmp_path / "nodes.csv.gz", [b"sn,cpu_milli,memory_mib,gpu,model\nn1,",
                                                     b"1" * (2 * MIB), b",1024,1,V100\n"])
    with pytest.raises(InputFormatError, match=r"nodes\.csv\.gz: line 2 is longer than "
                                               r"1,048,576 bytes: not a line of the node list"):
        read_nodes(bomb)


def test_cluster_spec_caps_nodes_and_the_variable_raises_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from hpcpolicy.cluster_io import load_cluster

    spec = tmp_path / "big.toml"
    spec.write_text('[[groups]]\nname = "cpu"\ncount = 2000000\ncores = 4\n')
    with pytest.raises(ConfigError, match=r"big\.toml: 2,000,000 nodes, more than the "
                                          r"1,000,000 .*set HPCPOLICY_MAX_CLUSTER_NODES"):
        load_cluster(spec)
    monkeypatch.setenv("HPCPOLICY_MAX_CLUSTER_NODES", "3000000")
    assert load_cluster(spec).total_nodes == 2_000_000
    monkeypatch.setenv("HPCPOLICY_MAX_CLUSTER_GROUPS", "lots")
    with pytest.raises(ConfigError, match=r"HPCPOLICY_MAX_CLUSTER_GROUPS='lots': must be a "):
        load_cluster(spec)


def test_a_cluster_spec_file_is_capped_before_it_is_parsed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from hpcpolicy.cluster_io import load_cluster

    spec = tmp_path / "padded.toml"
    spec.write_text("# padding\n" * 110_000 + '[[groups]]\nname = "cpu"\ncount = 4\ncores = 4\n')
    with pytest.raises(ConfigError, match=r"padded\.toml: 1,\d{3},\d{3} bytes, more than the "
                                          r"1,048,576 a cluster spec may have \(4,096 per node "
                                          r"group allowed\); .*set HPCPOLICY_MAX_CLUSTER_GROUPS"):
        load_cluster(spec)
    monkeypatch.setenv("HPCPOLICY_MAX_CLUSTER_GROUPS", "1000")
    assert load_cluster(spec).total_nodes == 4


def _site(path: Path) -> Any:
    from hpcpolicy.world.site_toml import load_site

    return load_site(path)


def _sweep(path: Path) -> Any:
    from hpcpolicy.sweep.spec import load_spec

    return load_spec(path)


def _cluster(path: Path) -> Any:
    from hpcpolicy.cluster_io import load_cluster

    return load_cluster(path)


def _record(path: Path) -> Any:
    from hpcpolicy.config import read_json_object

    return read_json_object(path)


def _train_config(path: Path) -> Any:
    from hpcpolicy.training.options import config_fields

    return config_fields(path, "ppo")


def _launch(path: Path) -> Any:
    from hpcpolicy.marl.distributed import worker_main
    from hpcpolicy.ppo.ddppo import LAUNCH_FILE

    path.rename(path.with_name(LAUNCH_FILE))
    return worker_main(path.parent)


def _env_world(path: Path) -> Any:
    from hpcpolicy.env.factory import _world

    return _world("jobs.parquet", path.read_text())


DEEP_TOML = "a = " + "[" * 5000 + "]" * 5000 + "\n"
DEEP_JSON = "[" * 100_000 + "]" * 100_000


@pytest.mark.parametrize(("reader", "name", "text"), [
    (_site, "site.toml", DEEP_TOML), (_sweep, "sweep.toml", DEEP_TOML),
    (_cluster, "c.toml", DEEP_TOML), (_cluster, "c.json", DEEP_JSON),
    (_record, "result.json", DEEP_JSON), (_train_config, "config.json", DEEP_JSON),
    (_launch, "x.json", DEEP_JSON), (_env_world, "w.json", DEEP_JSON),
])
def test_deeply_nested_documents_end_in_one_line(tmp_path: Path, reader: Callable[[Path], Any],
                                                 name: str, text: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(ConfigError, match=r"nested more than 64 levels deep") as info:
        reader(path)
    assert "\n" not in str(info.value)


def test_limits_are_checked_options(tmp_path: Path) -> None:
    log = write_stream(tmp_path / "t.swf", [SWF_HEAD, SWF_LINE])
    line = one_line_error(invoke("ingest", str(log), "--max-line-bytes", "0"))
    assert "max_line_bytes" in line and "must be >= 1" in line
