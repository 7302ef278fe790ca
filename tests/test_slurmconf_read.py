"""Reading slurm.conf (hpcpolicy.slurmconf): Slurm's value syntax and line rules, includes,
DEFAULT lines, the test cluster's file and real sites' files, and one-line refusals."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpcpolicy.errors import ConfigError
from hpcpolicy.slurmconf import read_slurm_conf
from hpcpolicy.slurmconf.values import slurm_bool, slurm_minutes, slurm_seconds, slurm_uint

FIXTURES = Path(__file__).parent / "data" / "slurm_conf"


def _conf(tmp_path: Path, text: str, name: str = "slurm.conf") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.mark.parametrize(("text", "seconds"), [
    ("90", 5400), ("02:30", 150), ("1:00:00", 3600), ("1-12", 129600), ("2-0", 172800),
    ("1-12:30", 131400), ("1-00:00:01", 86401), ("0", 0), ("UNLIMITED", None),
    ("infinite", None), ("-1", None)])
def test_durations_read_as_slurms_time_str2secs(text: str, seconds: int | None) -> None:
    assert slurm_seconds(text, "x") == seconds


@pytest.mark.parametrize("text", ["1:2:3:4", "1-2-3", "abc", "", "1h", "1:-2", "-5"])
def test_durations_slurm_refuses_are_refused(text: str) -> None:
    with pytest.raises(ConfigError, match=r"^here: .* is not a time; Slurm writes"):
        slurm_seconds(text, "here")


def test_minutes_round_up_as_time_str2mins() -> None:
    assert slurm_minutes("0:61", "x") == 2
    assert slurm_minutes("14-0", "x") == 14 * 1440


def test_numbers_and_booleans_as_slurm_reads_them() -> None:
    assert [slurm_uint(t, "x") for t in ("1000", "0x10", "010", "2k", "UNLIMITED")] == [
        1000, 16, 8, 2048, None]
    for bad in ("-1", "1.5", "abc", "4294967296"):
        with pytest.raises(ConfigError, match=r"^f:3:K: "):
            slurm_uint(bad, "f:3:K")
    assert [slurm_bool(t, "x") for t in ("YES", "up", "1", "No", "DOWN", "0")] == [
        True, True, True, False, False, False]
    with pytest.raises(ConfigError, match="write YES or NO"):
        slurm_bool("maybe", "x")


def test_lines_comments_continuations_quotes_and_case(tmp_path: Path) -> None:
    conf = read_slurm_conf(_conf(tmp_path, (
        "priorityweightage=1000   # a comment\n"
        "PriorityWeightTRES=CPU=1000,\\\n"
        "Mem=2000,GRES/gpu=3000\n"
        "SchedulerParameters=bf_window=2880,bf_continue,\\\n"
        "default_queue_depth=50\n"
        "SlurmctldLogFile=/var/log/a\\#b.log\n"
        "NodeName=n[01-04] CPUs=8 RealMemory=64000 Feature=\"a b\"\n"
        "PartitionName=batch Nodes=n[01-04] MaxTime=2-0 Default=yes\n")))
    assert conf.priority.weights == {"Age": 1000}
    assert conf.priority.tres_weights == {"CPU": 1000, "Mem": 2000, "GRES/gpu": 3000}
    assert (conf.scheduler.bf_window_min, conf.scheduler.bf_continue,
            conf.scheduler.default_queue_depth) == (2880, True, 50)
    assert conf.settings["SlurmctldLogFile"].value == "/var/log/a#b.log"
    assert conf.settings["PriorityWeightAge"].key == "PriorityWeightAge"
    assert str(conf.settings["PriorityWeightTRES"].source).endswith("slurm.conf:2")
    assert conf.settings["PriorityWeightTRES"].source.span == 2
    assert conf.nodes[0].names == ("n01", "n02", "n03", "n04")
    assert conf.nodes[0].settings["Feature"].value == "a b"
    batch = conf.partitions["batch"]
    assert (batch.max_time_s, batch.default, len(batch.nodes)) == (172800, True, 4)


def test_default_lines_apply_to_the_lines_below_only(tmp_path: Path) -> None:
    conf = read_slurm_conf(_conf(tmp_path, (
        "NodeName=a1 CPUs=2\n"
        "NodeName=d1 Sockets=2 CoresPerSocket=3 ThreadsPerCore=2\n"
        "NodeName=DEFAULT CPUs=4 RealMemory=1000\n"
        "NodeName=b[1-2]\n"
        "NodeName=DEFAULT CPUs=8\n"
        "NodeName=c1 Sockets=2 CoresPerSocket=3\n"
        "PartitionName=DEFAULT MaxTime=30 State=UP\n"
        "PartitionName=debug Nodes=a1,b[1-2] PriorityTier=3\n"
        "PartitionName=DEFAULT MaxTime=UNLIMITED\n"
        "PartitionName=long Nodes=ALL Priority=5\n")))
    cpus = {n: g.cpus for g in conf.nodes for n in g.names}
    assert cpus == {"a1": 2, "b1": 4, "b2": 4, "c1": 8, "d1": 12}
    assert [g.real_memory_mib for g in conf.nodes] == [1, 1, 1000, 1000]
    debug, long = conf.partitions["debug"], conf.partitions["long"]
    assert (debug.max_time_s, debug.priority_tier, debug.priority_job_factor) == (1800, 3, 1)
    assert (long.max_time_s, long.priority_tier, long.priority_job_factor) == (None, 5, 5)
    assert len(long.nodes) == conf.node_count == 5


def test_node_sets_by_list_or_feature_name_partition_nodes(tmp_path: Path) -> None:
    conf = read_slurm_conf(_conf(tmp_path, (
        "PartitionName=gpu Nodes=gpus,n1\n"       # partitions are built after every node
        "NodeName=n[1-2] Feature=cpu\nNodeName=g[1-2] Features=gpu,a100\n"
        "NodeSet=gpus Feature=a100\nNodeSet=cpus Nodes=n[1-2]\n"
        "PartitionName=cpu Nodes=cpus\n")))
    assert conf.partitions["gpu"].nodes == ("g1", "g2", "n1")
    assert conf.partitions["cpu"].nodes == ("n1", "n2")


def test_includes_are_relative_to_the_main_file_and_take_cluster_name(tmp_path: Path) -> None:
    sub = tmp_path / "conf.d"
    sub.mkdir()
    _conf(tmp_path, "NodeName=n[1-2] CPUs=4\n", "nodes.conf")
    _conf(tmp_path, "PriorityWeightAge=7\n", "prio-mycluster.conf")
    _conf(sub, "Include nodes.conf\n", "parts.conf")  # relative to slurm.conf's folder
    main = _conf(tmp_path, "ClusterName=mycluster\ninclude prio-%c.conf\n"
                           "INCLUDE conf.d/parts.conf\nPartitionName=p Nodes=ALL\n")
    conf = read_slurm_conf(main)
    assert conf.priority.weights["Age"] == 7
    assert conf.node_count == 2
    assert str(conf.settings["PriorityWeightAge"].source) == f"{tmp_path}/prio-mycluster.conf:1"
    assert list(conf.files) == [str(main), str(tmp_path / "prio-mycluster.conf"),
                                str(tmp_path / "conf.d/parts.conf"),
                                str(tmp_path / "nodes.conf")]


@pytest.mark.parametrize(("files", "message"), [
    ({"slurm.conf": "Include a.conf\n", "a.conf": "Include slurm.conf\n"},
     r"^.*a.conf:1: Include .*slurm.conf includes itself .*remove the cycle$"),
    ({"slurm.conf": "Include missing.conf\n"},
     r"^.*slurm.conf:1: .*missing.conf: cannot read it: No such file"),
    ({"slurm.conf": "Include *.conf\n"}, r"slurm.conf:1: Include \*.conf: Slurm does not read "
                                         r"glob patterns .*one Include line per file$"),
    ({"slurm.conf": "Include x-%c.conf\n"}, r"slurm.conf:1: .*set ClusterName above"),
    ({"slurm.conf": "Include a.conf\n" * 200, "a.conf": "#" * 120_000 + "\n"},
     r"slurm.conf:\d+: .*a.conf: the configuration would pass 16 MiB .*included over and over"),
    ({"slurm.conf": "Include a.conf\n",
      **{"a.conf" if i == 0 else f"a{i}.conf": f"Include a{i + 1}.conf\n" for i in range(20)}},
     r"nested more than 16 deep; flatten the includes$"),
])
def test_bad_includes_end_in_one_line(tmp_path: Path, files: dict[str, str],
                                      message: str) -> None:
    for name, text in files.items():
        _conf(tmp_path, text, name)
    with pytest.raises(ConfigError, match=message) as caught:
        read_slurm_conf(tmp_path / "slurm.conf")
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(("text", "message"), [
    ("A=1\nPriorityWeightAge=lots\n", r"slurm.conf:2:PriorityWeightAge: 'lots' is not a whole"),
    ("PriorityMaxAge=soon\n", r"slurm.conf:1:PriorityMaxAge: 'soon' is not a time"),
    ("PriorityFavorSmall=maybe\n", r"slurm.conf:1:PriorityFavorSmall: 'maybe' .*YES or NO"),
    ("SchedulerParameters=bf_window=0\n",
     r"slurm.conf:1:SchedulerParameters: bf_window=0 is not a whole number in 1..43200"),
    ("PriorityWeightTRES=CPU=x\n", r"slurm.conf:1:PriorityWeightTRES: CPU=x has no number"),
    ("PriorityType=multifactor\n", r"slurm.conf:1:PriorityType: .*write priority/multifactor"),
    ("NodeName=n1\nPartitionName=p Nodes=n[1-2] MaxTime=2-0\n",
     r"slurm.conf:2:Nodes: node\(s\) n2 are not defined by any NodeName line"),
    ("NodeName=n1\nPartitionName=p Nodes=n1 MaxTime=2days\n",
     r"slurm.conf:2:MaxTime: '2days' is not a time"),
    ("NodeName=n1\nPartitionName=p Nodes=n1 State=OPEN\n", r"slurm.conf:2:State: 'OPEN'"),
    ("NodeName=n1\nPartitionName=p Nodes=n1 PriorityTier=70000\n", r"slurm.conf:2:PriorityTier"),
    ("NodeName=n1\nPartitionName=p Nodes=n1\nPartitionName=p Nodes=n1\n",
     r"slurm.conf:3: partition p is defined again \(first at .*slurm.conf:2\)"),
    ("PriorityWeightAge=1 PriorityWeightQOS=2\n",
     r"slurm.conf:1: 'PriorityWeightQOS=2' left after .*put each key on its own line"),
    ("just words\n", r"slurm.conf:1: 'just words' is not Key=Value"),
    ("NodeName=n1 Feature=a b\n", r"slurm.conf:1: 'b' left after Feature=a"),
    ("NodeName=n[1-5000000]\n", r"slurm.conf:1:NodeName: .*'n\[1-5000000\]': names 5,000,000 "
                                r"nodes, more than the 1,000,000 read here"),
    ("NodeName=n[1-2\n", r"slurm.conf:1:NodeName: hostlist 'n\[1-2': unbalanced brackets"),
    ("NodeName=n1\nPartitionName=p Nodes=n[3-1]\n", r"slurm.conf:2:Nodes: hostlist"),
])
def test_values_slurm_refuses_name_file_line_and_key(tmp_path: Path, text: str,
                                                     message: str) -> None:
    with pytest.raises(ConfigError, match=message) as caught:
        read_slurm_conf(_conf(tmp_path, text))
    assert "\n" not in str(caught.value)


def test_unknown_keys_are_kept_and_listed_never_fatal(tmp_path: Path) -> None:
    conf = read_slurm_conf(_conf(tmp_path, "FastSchedule=1\nCacheGroups=0\n"
                                           "NodeName=n1 Colour=blue\n"))
    assert [(u.key, u.value, u.source.line) for u in conf.unknown] == [
        ("CacheGroups", "0", 2), ("Colour", "blue", 3)]
    assert "FastSchedule" in conf.settings  # obsolete, yet still in Slurm's table


def test_the_test_clusters_slurm_conf(tmp_path: Path) -> None:
    from slurm.cluster import PARTITIONS, LocalSlurm

    cluster = LocalSlurm(root=tmp_path, host="testhost")
    (tmp_path / "etc").mkdir()
    cluster._write_configs()
    conf = read_slurm_conf(cluster.conf)
    assert conf.unknown == ()
    assert conf.node_count == cluster.nodes
    assert {g.cpus for g in conf.nodes} == {cluster.cpus_per_node}
    assert set(conf.partitions) == set(PARTITIONS)
    assert conf.partitions["batch"].default and conf.partitions["batch"].max_time_s is None
    assert conf.partitions["short"].max_time_s == 600
    assert conf.scheduler.bf_interval_s == 1 and conf.scheduler.bf_continue
    assert conf.scheduler.default_queue_depth == 1000
    assert conf.priority.type == "priority/basic"


REAL = {
    # fixture -> (nodes, partitions, unknown keys, a fact read from it)
    "vpenso-saltstack.conf": (8, ["main", "long", "debug"],
                              ["CacheGroups", "JobCheckpointDir", "SchedulerPort"]),
    "cc-docker.conf": (2, ["normal"], []),
    "slurm-test7.17.1.conf": (10, [], []),
    "slurm-example.conf": (32, ["debug"], []),
}


@pytest.mark.parametrize("name", sorted(REAL))
def test_real_sites_files_parse_and_list_unknown_keys(name: str) -> None:
    path = FIXTURES / name
    assert path.read_text().startswith("# Source: github.com/")
    assert path.stat().st_size < 50_000
    conf = read_slurm_conf(path)
    nodes, partitions, unknown = REAL[name]
    assert conf.node_count == nodes
    assert list(conf.partitions) == partitions
    assert [u.key for u in conf.unknown] == unknown


def test_what_the_real_files_say_is_read() -> None:
    vpenso = read_slurm_conf(FIXTURES / "vpenso-saltstack.conf")
    assert vpenso.priority.weights == {"Age": 1000, "Fairshare": 8000, "JobSize": 1000}
    assert vpenso.priority.tres_weights == {"CPU": 1000, "Mem": 1000}
    assert vpenso.partitions["main"].max_time_s == 1800
    assert vpenso.partitions["main"].settings["TRESBillingWeights"].value == "cpu=1.0,mem=.25G"
    assert vpenso.partitions["main"].nodes == ("lxb001", "lxb002", "lxb005", "lxb006")
    cc = read_slurm_conf(FIXTURES / "cc-docker.conf").partitions["normal"]
    assert (cc.max_time_s, cc.max_nodes, cc.priority_tier) == (5 * 86400, 2, 50)
    t717 = read_slurm_conf(FIXTURES / "slurm-test7.17.1.conf")
    assert {g.cpus for g in t717.nodes} == {8}
    assert t717.nodes[0].settings["Gres"].value == "gpu:8"
