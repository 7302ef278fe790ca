"""The machine and the names an SWF header gives (issue 29 items 8 and 9).

* MaxProcs not a multiple of MaxNodes: the machine keeps the header's node count (nodes as
  equal as the totals allow), never one core per node, and says so.
* A MaxNodes/MaxProcs comment that counts only part of the machine ("batch partition; 512
  total") is flagged: jobs of the other partitions ran on nodes outside the replayed machine.
* ``; Partition: 1 standard`` and ``; Queue: 2 debug`` lines name the partitions and queues:
  the table holds the names, as it does for Slurm logs.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
from cli_helpers import invoke

from hpcpolicy.cluster_io import resolve_cluster
from hpcpolicy.ingest.swf.header import numbered_names

JOBS = [
    "1 0 0 600 4 -1 -1 4 1200 -1 1 1 1 1 1 10 -1 -1",
    "2 60 10 300 8 -1 -1 8 600 -1 1 2 1 1 2 4 -1 -1",
    "3 120 5 3600 2 -1 -1 2 7200 -1 1 1 1 1 1 8 -1 -1",
    "4 3600 0 30 1 -1 -1 1 60 -1 1 3 1 1 2 10 -1 -1",
]


def _ingest(tmp_path: Path, header: list[str]) -> tuple[Path, str]:
    log = tmp_path / "log.swf"
    log.write_text("\n".join([*header, *JOBS]) + "\n")
    table = tmp_path / "log.parquet"
    result = invoke("ingest", str(log), "-o", str(table))
    assert result.exit_code == 0, result.output
    return table, result.output


def test_uneven_procs_keep_the_header_node_count(tmp_path: Path) -> None:
    table, _ = _ingest(tmp_path, ["; MaxNodes: 4", "; MaxProcs: 10"])
    machine = resolve_cluster(table=table)
    assert (machine.total_cores, machine.total_nodes) == (10, 4)
    assert sorted(g.cores for g in machine.groups for _ in range(g.count)) == [2, 2, 3, 3]
    assert any("not a multiple" in n for n in machine.notes)
    result = invoke("simulate", str(table))
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "10 cores, 4 nodes" in text and "not a multiple" in text


def test_a_header_counting_one_partition_is_flagged(tmp_path: Path) -> None:
    table, _ = _ingest(tmp_path, ["; MaxNodes: 16 (batch partition; 24 total)",
                                  "; MaxProcs: 16"])
    machine = resolve_cluster(table=table)
    flagged = [n for n in machine.notes if n.startswith("warning: ")]
    assert len(flagged) == 1
    assert "16 (batch partition; 24 total)" in flagged[0] and "outside" in flagged[0]


def test_header_names_the_partitions_and_queues(tmp_path: Path) -> None:
    table, output = _ingest(tmp_path, [
        "; MaxNodes: 16", "; MaxProcs: 16", "; MaxPartitions: 3",
        "; Partition: 10 standard", "; Partition: 4 large", "; Partition:  8  hybrid",
        "; MaxQueues: 2", "; Queue: 1 normal", "; Queue: 2 debug"])
    jobs = pl.read_parquet(table).sort("job_id")
    assert jobs["partition"].to_list() == ["standard", "large", "hybrid", "standard"]
    assert jobs["qos"].to_list() == ["normal", "debug", "normal", "debug"]
    assert "partition names from the header" in " ".join(output.split())


def test_numbered_names() -> None:
    header = {"Partition": ["1  DEFAULT", "2  ALL"], "Queue": "1  [fque:1]"}
    assert numbered_names(header, "Partition") == {"1": "DEFAULT", "2": "ALL"}
    assert numbered_names(header, "Queue") == {"1": "[fque:1]"}
    assert numbered_names({"Partition": "no number"}, "Partition") == {}
