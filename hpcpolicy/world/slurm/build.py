"""Build a :class:`~.model.SlurmWorld` from a Slurm configuration and a workload.

What is read from where (the source files named are Slurm's, read at SchedMD/slurm master):

* **Nodes and partitions**: slurm.conf's NodeName lines (CPUs per node) and PartitionName
  lines (node set, PriorityTier, PriorityJobFactor, MaxTime, DefaultTime, MaxNodes). A job
  of partition ``(none)`` (the log names none) goes to the ``Default=YES`` partition.
* **Limits**: a job whose limit is over its partition's MaxTime is refused at submit
  (``EnforcePartLimits``), or, with ``over_max_time="cap"``, given MaxTime; a job without a
  limit (requested walltime 0) gets DefaultTime, else MaxTime, else the QOS's or
  association's MaxWall. Over MaxNodes, over a QOS or
  association MaxWall, more cores than the partition has or than its node count (or MaxNodes,
  for a job naming none) can hold: refused at submit. A job naming no node count is not
  otherwise held to MaxNodes when placed.
* **QOS** (``sacctmgr show qos``): priority, MaxJobsPerUser, MaxSubmitJobsPerUser,
  GrpTRES=cpu, MaxTRESPerUser=cpu, MaxWall. A job's QOS is the log's, else ``normal``.
* **Associations** (``sacctmgr show assoc``): the account tree with its shares (Fairshare),
  MaxJobs, MaxSubmit, GrpTRES=cpu, MaxWall; a user's unset limit is its account's (Slurm's
  inheritance). A job is charged to (its account, its user), else its user's first
  association. Without a dump, every account of the log sits under root and every user
  under its accounts, each with one share (sacctmgr's default Fairshare=1); a user of the
  log the dump lacks is added the same way. Both are said in :attr:`SlurmWorld.notes`.
* **Priority**: the job size, partition, QOS and TRES factors depend only on the request,
  so they are summed here (:func:`static_priority`); age and fair share change while a job
  waits and are computed by the replay (:mod:`.priority`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from hpcpolicy.errors import ConfigError
from hpcpolicy.slurmconf import Association, Partition, SlurmConfig
from hpcpolicy.slurmconf.values import param_list, slurm_seconds, slurm_uint
from hpcpolicy.workload import Workload
from hpcpolicy.world.slurm.model import NO_LIMIT, SlurmWorld

__all__ = ["OVER_MAX_TIME", "slurm_world", "static_priority"]

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]
OVER_MAX_TIME = ("reject", "cap")
"""What :func:`slurm_world` does with a job whose limit is over its partition's MaxTime."""
_NONE = "(none)"
"""The workload's name for a partition, account or QOS the log does not give."""
_CALC_PERIOD_S = 300
"""PriorityCalcPeriod's default, 5 minutes (slurm.conf(5))."""


def _count(limits: Mapping[str, str], key: str, where: str) -> int:
    """A whole-number limit (0 = none)."""
    text = limits.get(key)
    return 0 if not text else (slurm_uint(text, f"{where}:{key}") or NO_LIMIT)


def _cpus(limits: Mapping[str, str], key: str) -> int:
    """The ``cpu=`` of a TRES limit (0 = none)."""
    text = limits.get(key)
    if not text:
        return NO_LIMIT
    cpu = param_list(text).get("cpu")
    return int(cpu) if cpu and cpu.isdigit() else NO_LIMIT


def _wall(limits: Mapping[str, str], where: str) -> int:
    """MaxWall in seconds (0 = none)."""
    text = limits.get("MaxWall")
    return 0 if not text else (slurm_seconds(text, f"{where}:MaxWall") or NO_LIMIT)


@dataclass
class _Tree:
    """The association tree being built: root first, parents before children."""

    names: list[str] = field(default_factory=lambda: ["root"])
    parent: list[int] = field(default_factory=lambda: [-1])
    shares: list[float] = field(default_factory=lambda: [1.0])
    user: list[bool] = field(default_factory=lambda: [False])
    limits: list[Mapping[str, str]] = field(default_factory=lambda: [{}])
    where: list[str] = field(default_factory=lambda: ["root"])
    index: dict[tuple[str, str | None], int] = field(default_factory=dict)

    def add(self, account: str, user: str | None, parent: int, shares: float,
            limits: Mapping[str, str], where: str) -> int:
        key = (account, user)
        if key in self.index:
            return self.index[key]
        self.index[key] = len(self.names)
        self.names.append(account if user is None else f"{account}/{user}")
        self.parent.append(parent)
        self.shares.append(shares)
        self.user.append(user is not None)
        self.limits.append(limits)
        self.where.append(where)
        return self.index[key]


def _shares(row: Association) -> float:
    text = row.shares.strip().lower()
    return 1.0 if text in ("", "parent") else float(text)


def _tree(rows: tuple[Association, ...]) -> _Tree:
    """The accounts and users of a dump (partition rows folded into the first one)."""
    tree = _Tree()
    tree.index[("root", None)] = 0
    accounts = {r.account: r for r in rows if r.user is None and r.account != "root"}

    def place(name: str, seen: frozenset[str]) -> int:
        if name == "root" or name not in accounts or name in seen:
            return 0
        row = accounts[name]
        parent = place(row.parent or "root", seen | {name})
        return tree.add(name, None, parent, _shares(row), row.limits, str(row.source))

    for name in accounts:
        place(name, frozenset())
    for row in rows:
        if row.user is not None:
            parent = tree.index.get((row.account, None), 0)
            tree.add(row.account, row.user, parent, _shares(row), row.limits, str(row.source))
    return tree


def _job_assocs(tree: _Tree, w: Workload, notes: list[str]) -> I64:
    """The user association each job is charged to (added, one share, where missing)."""
    accounts = np.asarray(w.account) if w.account is not None else None
    first: dict[str, int] = {}
    for (_account, user), index in tree.index.items():
        if user is not None:
            first.setdefault(user, index)
    user_codes = np.asarray(w.user, dtype=np.int64)
    acct_codes = (np.asarray(accounts, dtype=np.int64) if accounts is not None
                  else np.zeros(len(w), dtype=np.int64))
    pairs, inverse = np.unique(user_codes * (len(w.accounts) + 1) + acct_codes,
                               return_inverse=True)
    table = np.empty(len(pairs), dtype=np.int64)
    added = 0
    for i, code in enumerate(pairs.tolist()):
        user = w.users[code // (len(w.accounts) + 1)]
        account = w.accounts[code % (len(w.accounts) + 1)] if accounts is not None else _NONE
        k: int | None = tree.index.get((account, user))
        if k is None and account == _NONE:
            k = first.get(user)
        if k is None:
            name = "root" if account == _NONE else account
            parent = tree.index.get((name, None))
            if parent is None:
                parent = tree.add(name, None, 0, 1.0, {}, "the log")
            k = tree.add(name, user, parent, 1.0, {}, "the log")
            added += 1
        table[i] = k
    out: I64 = table[inverse.reshape(-1)]
    if added:
        notes.append(f"{added} (account, user) pairs of the log have no association: each "
                     "added with one share (sacctmgr's default Fairshare=1)")
    return out


def _inherited(tree: _Tree, k: int, key: str) -> Mapping[str, str]:
    """The limits that hold ``key`` for association ``k``: its own, else its nearest
    ancestor's (Slurm passes unset limits down the tree)."""
    while k > 0 and key not in tree.limits[k]:
        k = tree.parent[k]
    return tree.limits[k]


def _partitions(conf: SlurmConfig, w: Workload) -> list[Partition]:
    """The configured partition of each of the workload's partition names."""
    default = next((p for p in conf.partitions.values() if p.default), None)
    out: list[Partition] = []
    for name in w.partitions:
        part = conf.partitions.get(name) or (default if name == _NONE else None)
        if part is None:
            known = ", ".join(conf.partitions) or "none"
            hint = "; mark one Default=YES" if name == _NONE else ""
            raise ConfigError(f"{next(iter(conf.files), 'slurm.conf')}: partition {name!r} of "
                              f"the log is not configured (known: {known}){hint}")
        out.append(part)
    return out


def static_priority(conf: SlurmConfig, w: Workload, parts: list[Partition],
                    part_cores: I64, node_total: int, cluster_cpus: int,
                    qos_norm: F64, job_qos: I64, limit: I64) -> F64:
    """The weighted job size, partition, QOS and TRES factors of each job.

    As ``priority_multifactor.c: set_priority_factors`` and ``_get_priority_internal``:

    * job size, favouring large jobs: (min_nodes / nodes + cpus / cluster_cpus) / 2;
      with PriorityFavorSmall: ((nodes - min_nodes) / nodes + (cluster_cpus - cpus) /
      cluster_cpus) / 2 (the node part 0 when min_nodes >= nodes); with
      ``PriorityFlags=SMALL_RELATIVE_TO_TIME``: max(min_nodes * cluster_cpus / nodes, cpus)
      / limit in minutes / cluster_cpus (1 minus that with PriorityFavorSmall); clipped to
      [0, 1];
    * partition: PriorityJobFactor / the largest PriorityJobFactor of any partition
      (``norm_priority``);
    * QOS: its priority / the largest QOS priority;
    * TRES: each weighted TRES count over the partition's (``_get_tres_factors``): CPU
      (cores), Node, Mem (MiB, partition memory = its nodes' RealMemory).
    """
    prio = conf.priority
    weight = {k: float(v) for k, v in prio.weights.items()}
    procs = np.asarray(w.procs, dtype=np.float64)
    min_nodes = np.maximum(np.asarray(w.nodes, dtype=np.float64), 1.0)
    out = np.zeros(len(w), dtype=np.float64)
    if weight.get("JobSize") and node_total and cluster_cpus:
        if "SMALL_RELATIVE_TO_TIME" in prio.flags:
            size = np.maximum(min_nodes * cluster_cpus / node_total, procs)
            js = size / np.maximum(-(-limit // 60), 1) / cluster_cpus
            js = 1.0 - js if prio.favor_small else js
        elif prio.favor_small:
            js = (np.clip(node_total - min_nodes, 0, None) / node_total
                  + (cluster_cpus - procs) / cluster_cpus) / 2
        else:
            js = (min_nodes / node_total + procs / cluster_cpus) / 2
        out += np.clip(js, 0.0, 1.0) * weight["JobSize"]
    top = max((p.priority_job_factor for p in conf.partitions.values()), default=0)
    if weight.get("Partition") and top:
        factor = np.array([p.priority_job_factor / top for p in parts], dtype=np.float64)
        out += factor[np.asarray(w.partition)] * weight["Partition"]
    if weight.get("QOS"):
        out += qos_norm[job_qos] * weight["QOS"]
    tres = {k.lower(): float(v) for k, v in prio.tres_weights.items()}
    codes = np.asarray(w.partition)
    if tres.get("cpu"):
        out += procs / np.maximum(part_cores[codes], 1) * tres["cpu"]
    if tres.get("node"):
        counts = np.array([max(len(p.nodes), 1) for p in parts], dtype=np.float64)
        out += min_nodes / counts[codes] * tres["node"]
    if tres.get("mem"):
        mem = {n: g.real_memory_mib for g in conf.nodes for n in g.names}
        total = np.array([max(sum(mem.get(n, 0) for n in p.nodes), 1) for p in parts],
                         dtype=np.float64)
        out += np.asarray(w.mem_mib, dtype=np.float64) / total[codes] * tres["mem"]
    return out


def _qos(conf: SlurmConfig, w: Workload, notes: list[str]) -> tuple[list[str], I64]:
    """The QOS names of the world (``normal`` first when none is configured) and each
    job's QOS index."""
    names = list(conf.qos) or ["normal"]
    index = {n: k for k, n in enumerate(names)}
    if w.qos is None:
        default = index.get("normal", 0)
        return names, np.full(len(w), default, dtype=np.int64)
    unknown = [q for q in w.qos_names if q not in index and q != _NONE]
    for q in unknown:
        index[q] = len(names)
        names.append(q)
    if unknown:
        notes.append(f"QOS {', '.join(unknown)} of the log not in the QOS dump: no limits, "
                     "priority 0")
    table = np.array([index.get(q, index.get("normal", 0)) for q in w.qos_names],
                     dtype=np.int64)
    return names, table[np.asarray(w.qos)]


def slurm_world(conf: SlurmConfig, workload: Workload, *,
                over_max_time: str = "reject") -> SlurmWorld:
    """The world that :func:`~hpcpolicy.world.slurm.replay` replays ``workload`` in.

    Args:
        conf: slurm.conf (and optionally sacctmgr dumps) read by
            :func:`hpcpolicy.slurmconf.read_slurm_conf` / ``with_accounting``.
        workload: the jobs; its optional ``account`` and ``qos`` codes choose each job's
            association and QOS.
        over_max_time: ``reject`` (Slurm's ``EnforcePartLimits``) or ``cap`` a job whose
            limit is over its partition's MaxTime.

    Returns:
        The frozen, picklable world (see :class:`SlurmWorld`).

    Raises:
        ConfigError: a partition of the log is not configured, the configuration has no
            nodes, or a limit is not one Slurm reads (one line naming file:line:key).

    Example:
        >>> world = slurm_world(read_slurm_conf("slurm.conf"), workload)  # doctest: +SKIP
        >>> world.nodes                                                   # doctest: +SKIP
    """
    if over_max_time not in OVER_MAX_TIME:
        raise ConfigError(f"over_max_time {over_max_time!r} is not one of "
                          f"{', '.join(OVER_MAX_TIME)}")
    notes: list[str] = []
    every = [n for g in conf.nodes for n in g.names]
    if not every:
        raise ConfigError(f"{next(iter(conf.files), 'slurm.conf')}: no NodeName line defines "
                          "a node; the Slurm world needs the machine")
    node_of = {n: k for k, n in enumerate(dict.fromkeys(every))}
    cores_of = {n: g.cpus for g in conf.nodes for n in g.names}
    node_cores = np.array([cores_of[n] for n in node_of], dtype=np.int64)
    parts = _partitions(conf, workload)
    sets = [np.array(sorted(node_of[n] for n in p.nodes), dtype=np.int64) for p in parts]
    part_ptr = np.concatenate([[0], np.cumsum([len(s) for s in sets])]).astype(np.int64)
    part_nodes = np.concatenate([*sets, np.zeros(0, np.int64)]).astype(np.int64)
    part_cores = np.array([int(node_cores[s].sum()) for s in sets], dtype=np.int64)
    codes = np.asarray(workload.partition, dtype=np.int64)

    limit = np.asarray(workload.req_walltime, dtype=np.int64).copy()
    max_time = np.array([p.max_time_s or 0 for p in parts], dtype=np.int64)[codes]
    default = np.array([p.default_time_s or p.max_time_s or 0 for p in parts],
                       dtype=np.int64)[codes]
    unset = limit <= 0
    limit[unset] = default[unset]
    over = (max_time > 0) & (limit > max_time)
    rejected = np.zeros(len(workload), dtype=bool)
    if over_max_time == "cap":
        limit[over] = max_time[over]
    else:
        rejected |= over
    max_nodes = np.array([p.max_nodes or 0 for p in parts], dtype=np.int64)[codes]
    nodes = np.asarray(workload.nodes, dtype=np.int64)
    rejected |= (max_nodes > 0) & (nodes > max_nodes)
    procs = np.asarray(workload.procs, dtype=np.int64)
    widest = np.array([int(node_cores[s].max(initial=0)) for s in sets], dtype=np.int64)
    rejected |= (procs > part_cores[codes]) | (nodes > np.diff(part_ptr)[codes])
    rejected |= (nodes > 0) & (procs > nodes * widest[codes])  # its nodes cannot hold it
    rejected |= (nodes == 0) & (max_nodes > 0) & (procs > max_nodes * widest[codes])

    qos_names, job_qos = _qos(conf, workload, notes)
    qos_rows = [conf.qos.get(q) for q in qos_names]
    qos_lim = [q.limits if q else {} for q in qos_rows]
    qwhere = [str(q.source) if q else "qos" for q in qos_rows]
    top = max((q.priority for q in conf.qos.values()), default=0)
    qos_norm = np.array([(q.priority / top) if q and top else 0.0 for q in qos_rows])
    qos_wall = np.array([_wall(lim, wh) for lim, wh in zip(qos_lim, qwhere, strict=True)],
                        dtype=np.int64)

    tree = _tree(conf.associations)
    if not conf.associations:
        notes.append("no association dump: every account and user has one share")
    job_assoc = _job_assocs(tree, workload, notes)
    n_assoc = len(tree.names)
    a_wall = np.array([_wall(_inherited(tree, k, "MaxWall"), tree.where[k])
                       for k in range(n_assoc)], dtype=np.int64)
    for wall in (qos_wall[job_qos], a_wall[job_assoc]):
        given = limit > 0
        limit[~given & (wall > 0)] = wall[~given & (wall > 0)]  # no limit: MaxWall's
        rejected |= given & (wall > 0) & (limit > wall)
    limit[limit <= 0] = np.iinfo(np.int32).max  # no limit anywhere: UNLIMITED

    node_total = len(node_of)
    cluster_cpus = int(node_cores.sum())
    prio, sched = conf.priority, conf.scheduler
    calc = conf.settings.get("PriorityCalcPeriod")
    calc_s = (slurm_seconds(calc.value, calc.where()) if calc else None) or _CALC_PERIOD_S
    return SlurmWorld(
        node_cores=node_cores, part_ptr=part_ptr, part_nodes=part_nodes,
        part_tier=np.array([p.priority_tier for p in parts], dtype=np.int64),
        limit=limit,
        run=np.minimum(np.asarray(workload.run_time, dtype=np.int64), limit),
        rejected=rejected, job_qos=job_qos, job_assoc=job_assoc,
        job_user=np.asarray(workload.user, dtype=np.int64),
        static_prio=static_priority(conf, workload, parts, part_cores, node_total,
                                    cluster_cpus, qos_norm, job_qos, limit),
        qos_max_jobs_pu=np.array([_count(lim, "MaxJobsPerUser", wh)
                                  for lim, wh in zip(qos_lim, qwhere, strict=True)],
                                 dtype=np.int64),
        qos_max_submit_pu=np.array([_count(lim, "MaxSubmitJobsPerUser", wh)
                                    for lim, wh in zip(qos_lim, qwhere, strict=True)],
                                   dtype=np.int64),
        qos_grp_cpus=np.array([_cpus(lim, "GrpTRES") for lim in qos_lim], dtype=np.int64),
        qos_max_cpus_pu=np.array([_cpus(lim, "MaxTRESPerUser") for lim in qos_lim],
                                 dtype=np.int64),
        assoc_parent=np.array(tree.parent, dtype=np.int64),
        assoc_shares=np.array(tree.shares, dtype=np.float64),
        assoc_is_user=np.array(tree.user, dtype=bool),
        assoc_max_jobs=np.array([_count(_inherited(tree, k, "MaxJobs"), "MaxJobs",
                                        tree.where[k]) for k in range(n_assoc)],
                                dtype=np.int64),
        assoc_max_submit=np.array([_count(_inherited(tree, k, "MaxSubmit"), "MaxSubmit",
                                          tree.where[k]) for k in range(n_assoc)],
                                  dtype=np.int64),
        assoc_grp_cpus=np.array([_cpus(tree.limits[k], "GrpTRES") for k in range(n_assoc)],
                                dtype=np.int64),
        multifactor=prio.type == "priority/multifactor",
        weight_age=float(prio.weights.get("Age", 0)),
        weight_fairshare=float(prio.weights.get("Fairshare", 0)),
        max_age=int(prio.max_age_s or 0),
        decay_half_life=int(prio.decay_half_life_s or 0),
        calc_period=max(int(calc_s), 1),
        fair_tree="NO_FAIR_TREE" not in prio.flags and "DEPTH_OBLIVIOUS" not in prio.flags,
        backfill=sched.type == "sched/backfill",
        bf_interval=max(sched.bf_interval_s, 1), bf_window=sched.bf_window_min * 60,
        bf_resolution=sched.bf_resolution_s, bf_max_job_test=sched.bf_max_job_test,
        bf_max_job_user=sched.bf_max_job_user, bf_continue=sched.bf_continue,
        default_queue_depth=sched.default_queue_depth,
        qos_names=tuple(qos_names), assoc_names=tuple(tree.names), notes=tuple(notes))
