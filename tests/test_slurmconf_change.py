"""Configuration changes (hpcpolicy.slurmconf): the candidate language, applying it, sacctmgr
dumps, and the answer in Slurm's terms (a diff `patch` applies, sacctmgr commands, steps)."""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from hpcpolicy.errors import ConfigError
from hpcpolicy.slurmconf import (
    SlurmConfig,
    apply_candidate,
    change_advice,
    conf_diff,
    parse_candidate,
    read_slurm_conf,
    with_accounting,
)
from hpcpolicy.slurmconf.changes import (
    AssocChange,
    ConfFile,
    GlobalChange,
    PartitionChange,
    QosChange,
    SchedulerChange,
)
from hpcpolicy.slurmconf.sacctmgr import loads_assoc, loads_qos

FIXTURES = Path(__file__).parent / "data" / "slurm_conf"
SITE = """\
ClusterName=site
Include prio.conf
SchedulerParameters=bf_interval=30,bf_continue
NodeName=DEFAULT CPUs=16 RealMemory=64000
NodeName=n[01-08]
PartitionName=DEFAULT State=UP
PartitionName=batch Nodes=n[01-08] Default=YES MaxTime=1-0   # the main queue
PartitionName=short Nodes=n[01-02] \\
  MaxTime=30 PriorityTier=2
"""
PRIO = "PriorityType=priority/multifactor\nPriorityWeightAge=1000\nPriorityMaxAge=7-0\n"
QOS = ("Name|Priority|GrpTRES|MaxWall|MaxTRESPU|MaxJobsPU|MaxSubmitPU|Flags\n"
       "normal|10||2-00:00:00||20|100|\nhigh|100|cpu=512|1-00:00:00|cpu=64|5||DenyOnLimit\n")
ASSOC = ("Cluster|Account|User|Partition|Share|GrpTRES|MaxJobs|MaxSubmit|MaxWall|QOS|Def QOS\n"
         "site|root|||1|||||normal|\nsite|physics|||100||||||\n"
         "site|physics|alice||1||10|||normal,high|normal\nsite|biology|||50||||||\n")


@pytest.fixture
def site(tmp_path: Path) -> SlurmConfig:
    (tmp_path / "slurm.conf").write_text(SITE)
    (tmp_path / "prio.conf").write_text(PRIO)
    (tmp_path / "acct").mkdir()
    (tmp_path / "acct" / "qos.txt").write_text(QOS)
    (tmp_path / "acct" / "assoc.txt").write_text(ASSOC)
    return with_accounting(read_slurm_conf(tmp_path / "slurm.conf"), tmp_path / "acct")


@pytest.mark.parametrize(("text", "changes"), [
    ("PriorityWeightAge=5000,PriorityMaxAge=14-0",
     (GlobalChange("PriorityWeightAge", "5000"), GlobalChange("PriorityMaxAge", "14-0"))),
    ("priorityweighttres=CPU=1000,Mem=2000,GRES/gpu=3000 PriorityFavorSmall=YES",
     (GlobalChange("PriorityWeightTRES", "CPU=1000,Mem=2000,GRES/gpu=3000"),
      GlobalChange("PriorityFavorSmall", "YES"))),
    ("partition batch MaxTime=2-0", (PartitionChange("batch", "MaxTime", "2-0"),)),
    ("PartitionName=batch PriorityTier=2 maxnodes=4",
     (PartitionChange("batch", "PriorityTier", "2"), PartitionChange("batch", "MaxNodes", "4"))),
    ("SchedulerParameters: bf_window=2880,bf_continue",
     (SchedulerChange("bf_window", "2880"), SchedulerChange("bf_continue", None))),
    ("bf_window=2880", (SchedulerChange("bf_window", "2880"),)),
    ("qos normal MaxJobsPerUser=50", (QosChange("normal", "MaxJobsPerUser", "50"),)),
    ("qos normal MaxSubmitPU=10 GrpTRES=cpu=100,mem=10G",
     (QosChange("normal", "MaxSubmitJobsPerUser", "10"),
      QosChange("normal", "GrpTRES", "cpu=100,mem=10G"))),
    ("assoc account=physics Fairshare=200",
     (AssocChange((("account", "physics"),), "Share", "200"),)),
    ("conf:new-slurm.conf", (ConfFile(Path("new-slurm.conf")),)),
])
def test_candidates_read_as_typed_changes(text: str, changes: tuple[object, ...]) -> None:
    assert parse_candidate(text) == changes


@pytest.mark.parametrize(("text", "message"), [
    ("PriorityWeightAgee=5000", r"PriorityWeightAgee is not a slurm.conf key"),
    ("NodeName=n1", r"NodeName is not a slurm.conf key written Key=Value"),
    ("partition batch Colour=blue", r"Colour is not a partition key"),
    ("qos normal MaxJobz=5", r"MaxJobz is not a QOS option"),
    ("qos normal MaxWall=forever", r"MaxWall: 'forever' is not a time"),
    ("qos normal MaxJobsPerUser=many", r"MaxJobsPerUser: 'many' is not a whole number"),
    ("assoc user=alice MaxJobs=3", r"name the association with account=NAME"),
    ("assoc account=physics GrpTRES=cpu", r"cpu has no amount"),
    ("qos normal Priority=high", r"Priority: 'high' is not a whole number"),
    ("assoc account=physics Priority=-3", r"Priority: '-3' is not a whole number"),
    ("assoc account=physics Fairshare=lots", r"Share: 'lots' is not a whole number"),
    ("   ", r"no Key=Value in it"),
])
def test_bad_candidates_are_refused_in_one_line(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=rf"^candidate {text!r}: .*{message}") as caught:
        parse_candidate(text)
    assert "\n" not in str(caught.value)


def test_applying_changes_gives_a_new_checked_configuration(site: SlurmConfig) -> None:
    new = apply_candidate(site, "PriorityWeightAge=5000,PriorityMaxAge=14-0,bf_window=2880")
    assert new.priority.weights["Age"] == 5000 and new.priority.max_age_s == 14 * 86400
    assert new.scheduler.bf_window_min == 2880 and new.scheduler.bf_continue
    assert new.settings["SchedulerParameters"].value == "bf_interval=30,bf_continue,bf_window=2880"
    assert site.priority.weights["Age"] == 1000  # the old one is untouched
    again = apply_candidate(site, "bf_interval=60")  # an option written: changed in place
    assert again.settings["SchedulerParameters"].value == "bf_interval=60,bf_continue"
    assert again.scheduler.bf_interval_s == 60
    part = apply_candidate(site, "partition short MaxTime=2-0 PriorityJobFactor=7")
    assert part.partitions["short"].max_time_s == 172800
    assert part.partitions["short"].priority_job_factor == 7
    assert part.partitions["batch"] == site.partitions["batch"]
    qos = apply_candidate(site, "qos normal MaxJobsPerUser=50")
    assert qos.qos["normal"].limits["MaxJobsPerUser"] == "50"
    assoc = apply_candidate(site, "assoc account=physics Fairshare=200")
    assert [a.shares for a in assoc.associations if a.account == "physics" and not a.user] == [
        "200"]


@pytest.mark.parametrize(("text", "message"), [
    ("PriorityWeightAge=abc", r"^candidate 'PriorityWeightAge=abc':PriorityWeightAge: 'abc'"),
    ("bf_window=99999", r"bf_window=99999 is not a whole number in 1..43200"),
    ("partition batch MaxTime=soon", r"MaxTime: 'soon' is not a time"),
    ("partition gpu MaxTime=1", r"no partition gpu in slurm.conf; one of batch, short"),
    ("qos gold Priority=5", r"no QOS gold in the sacctmgr dump; one of high, normal"),
    ("assoc account=chemistry Fairshare=5", r"no association account=chemistry in the sacctmgr"),
])
def test_changes_slurm_would_refuse_are_refused(site: SlurmConfig, text: str,
                                                message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        apply_candidate(site, text)


def _patched(tmp_path: Path, diff: str) -> Path:
    """A copy of tmp_path's slurm.conf folder with ``diff`` applied by GNU patch (after a
    --dry-run on the original files)."""
    if shutil.which("patch") is None:
        pytest.skip("GNU patch is not installed (apt-get install patch)")
    dry = subprocess.run(["patch", "--dry-run", "-p1", "-d", str(tmp_path)], input=diff,
                         capture_output=True, text=True, check=False)
    assert dry.returncode == 0, dry.stdout + dry.stderr
    copy = Path(tempfile.mkdtemp(dir=tmp_path.parent)) / "patched"
    shutil.copytree(tmp_path, copy)
    subprocess.run(["patch", "-p1", "-d", str(copy)], input=diff, capture_output=True,
                   text=True, check=True)
    return copy


@pytest.mark.parametrize("candidate", [
    "PriorityWeightAge=5000,PriorityMaxAge=14-0",       # lives in the included prio.conf
    "PriorityWeightFairshare=100000",                   # new key: appended to slurm.conf
    "SchedulerParameters: bf_window=2880,bf_resolution=600",
    "partition batch MaxTime=2-0",                      # line with a trailing comment
    "partition batch PriorityTier=3 QOS=normal",        # keys the line lacks
    "partition short PriorityTier=5",                   # a continued line
])
def test_the_diff_applies_and_reads_back_as_the_candidate(site: SlurmConfig, tmp_path: Path,
                                                         candidate: str) -> None:
    new = apply_candidate(site, candidate)
    diff = conf_diff(site, new)
    assert diff.startswith("--- a/")
    patched = read_slurm_conf(_patched(tmp_path, diff) / "slurm.conf")
    assert {k: s.value for k, s in patched.settings.items()} == {
        k: s.value for k, s in new.settings.items()}
    assert patched.priority == new.priority and patched.scheduler == new.scheduler
    for name, part in new.partitions.items():
        assert {k: s.value for k, s in patched.partitions[name].settings.items()} == {
            k: s.value for k, s in part.settings.items()}


def test_the_diff_keeps_comments_and_edits_only_the_changed_line(site: SlurmConfig) -> None:
    diff = conf_diff(site, apply_candidate(site, "partition batch MaxTime=2-0"))
    changed = [line for line in diff.splitlines() if line[:1] in "+-" and line[:3] not in (
        "---", "+++")]
    assert changed == [
        "-PartitionName=batch Nodes=n[01-08] Default=YES MaxTime=1-0   # the main queue",
        "+PartitionName=batch Nodes=n[01-08] Default=YES MaxTime=2-0   # the main queue"]
    assert conf_diff(site, apply_candidate(site, "qos normal MaxJobsPerUser=50")) == ""


def test_a_file_without_a_final_newline_and_a_whole_new_file(tmp_path: Path) -> None:
    shutil.copy(FIXTURES / "cc-docker.conf", tmp_path / "slurm.conf")
    old = read_slurm_conf(tmp_path / "slurm.conf")
    new = apply_candidate(old, "PriorityWeightAge=2000")
    assert read_slurm_conf(_patched(tmp_path, conf_diff(old, new)) / "slurm.conf").priority \
        == new.priority
    other = tmp_path.parent / "candidate.conf"
    other.write_text("NodeName=c[1-4] RealMemory=1000\nPartitionName=normal Nodes=c[1-4]\n")
    whole = apply_candidate(old, f"conf:{other}")
    assert whole.node_count == 4
    patched = read_slurm_conf(_patched(tmp_path, conf_diff(old, whole)) / "slurm.conf")
    assert patched.node_count == 4 and patched.settings == {}


def test_the_test_clusters_conf_takes_a_backfill_change(tmp_path: Path) -> None:
    from slurm.cluster import LocalSlurm

    cluster = LocalSlurm(root=tmp_path, host="testhost")
    (tmp_path / "etc").mkdir()
    cluster._write_configs()
    old = read_slurm_conf(cluster.conf)
    new = apply_candidate(old, "bf_window=60,bf_max_job_test=50")
    patched = read_slurm_conf(_patched(tmp_path / "etc", conf_diff(old, new)) / "slurm.conf")
    assert (patched.scheduler.bf_window_min, patched.scheduler.bf_max_job_test) == (60, 50)
    assert patched.scheduler.bf_interval_s == 1


def test_sacctmgr_dumps_in_any_column_order_with_optional_columns(site: SlurmConfig) -> None:
    assert site.qos["high"].priority == 100
    assert site.qos["high"].limits == {"GrpTRES": "cpu=512", "MaxWall": "1-00:00:00",
                                       "MaxTRESPerUser": "cpu=64", "MaxJobsPerUser": "5",
                                       "Flags": "DenyOnLimit"}
    alice = next(a for a in site.associations if a.user == "alice")
    assert (alice.account, alice.shares, alice.limits["MaxJobs"]) == ("physics", "1", "10")
    assert alice.parent == "physics"  # a user's association hangs under its account's
    shuffled = "MaxJobsPU|Name|Priority|\n7|low|1|\n"  # -p: a pipe ends every line
    assert loads_qos(shuffled, "q.txt")["low"].limits == {"MaxJobsPerUser": "7"}
    tree = loads_assoc("Account|Par Name|User|Fairshare\nphysics|root||5\n", "a.txt")
    assert (tree[0].parent, tree[0].shares, tree[0].cluster) == ("root", "5", "")


@pytest.mark.parametrize(("text", "message"), [
    ("Priority|MaxWall\n1|2\n", r"^q.txt:1: no Name column in the header; is it `sacctmgr show"),
    ("Name|MaxWall\nnormal|forever\n", r"^q.txt:2:MaxWall: 'forever' is not a time"),
    ("Name|Priority\nnormal|1|2\n", r"^q.txt:2: 3 fields for the 2 columns of the header"),
    ("", r"^q.txt: empty; export it with `sacctmgr show qos -P > qos.txt`"),
    ("Name|GrpTRES\nnormal|cpu=lots\n", r"^q.txt:2:GrpTRES: 'lots' is not a whole number"),
])
def test_bad_dumps_end_in_one_line(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        loads_qos(text, "q.txt")


def _commands(watch: tuple[str, ...]) -> list[str]:
    return [re.findall(r"\w+", line)[0] for line in watch]


def test_the_advice_speaks_slurm(site: SlurmConfig) -> None:
    weights = change_advice(site, apply_candidate(site, "PriorityWeightAge=5000"))
    assert weights.steps[-1] == "scontrol reconfigure" and len(weights.steps) == 2
    assert _commands(weights.watch) == ["sprio"]
    assert weights.sacctmgr == ()
    backfill = change_advice(site, apply_candidate(site, "bf_window=2880"))
    assert _commands(backfill.watch) == ["sdiag"]
    select = change_advice(site, apply_candidate(site, "SelectType=select/linear"))
    assert "restart slurmctld (and the slurmd daemons) for SelectType" in select.steps[1]
    port = change_advice(site, apply_candidate(site, "SlurmctldPort=7000"))
    assert port.steps[1].startswith("stop every Slurm daemon and start them again: "
                                    "SlurmctldPort")
    qos = change_advice(site, apply_candidate(site, "qos normal MaxJobsPerUser=50 Priority=20"))
    assert qos.sacctmgr == (
        "sacctmgr -i modify qos where name=normal set Priority=20 MaxJobsPerUser=50",)
    assert qos.diff == "" and qos.steps == ()
    assert _commands(qos.watch) == ["sprio", "squeue"]
    user = change_advice(site, apply_candidate(site, "assoc account=physics user=alice "
                                                     "MaxJobs=3 Fairshare=4"))
    assert user.sacctmgr == ("sacctmgr -i modify user where name=alice account=physics "
                             "cluster=site set Fairshare=4 MaxJobs=3",)
    account = change_advice(site, apply_candidate(site, "assoc account=biology Fairshare=200"))
    assert account.sacctmgr == (
        "sacctmgr -i modify account where name=biology cluster=site set Fairshare=200",)
    assert _commands(account.watch) == ["sshare", "squeue"]
