"""``sacctmgr show qos -P`` and ``sacctmgr show assoc -P`` dumps: QOS and the association tree.

A dump is pipe-separated with a header line (``-P``, parsable2; ``-p`` ends every line with
a pipe, read as one more, empty, column). Columns may come in any order and sites add or
drop optional ones. The header names are sacctmgr's own (src/sacctmgr/common.c); short
forms are read as the long names ``sacctmgr modify ... set`` takes (sacctmgr(1)):
``MaxJobsPU`` is MaxJobsPerUser, ``MaxSubmitPU`` MaxSubmitJobsPerUser, ``MaxTRESPU``
MaxTRESPerUser, ``Par Name`` (older releases) ParentName. Empty cells are "no limit" and
are left out.

Example:
    >>> qos = loads_qos("Name|Priority|MaxJobsPU|MaxWall\\nnormal|10|50|2-00:00:00\\n", "q")
    >>> qos["normal"].priority, dict(qos["normal"].limits)
    (10, {'MaxJobsPerUser': '50', 'MaxWall': '2-00:00:00'})
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from hpcpolicy.errors import ConfigError
from hpcpolicy.slurmconf.model import Association, Qos, SlurmConfig, Source
from hpcpolicy.slurmconf.values import memory_mib, param_list, slurm_seconds, slurm_uint

__all__ = ["ALIASES", "ASSOC_FILE", "QOS_FILE", "check_limit", "loads_assoc", "loads_qos",
           "read_sacctmgr_dir", "with_accounting"]

QOS_FILE = "qos.txt"
"""Name of the ``sacctmgr show qos -P`` dump in a ``--sacctmgr`` folder."""
ASSOC_FILE = "assoc.txt"
"""Name of the ``sacctmgr show assoc -P`` dump in a ``--sacctmgr`` folder."""
ALIASES: Mapping[str, str] = {
    "maxjobspu": "MaxJobsPerUser", "maxsubmitpu": "MaxSubmitJobsPerUser",
    "maxsubmitjobspu": "MaxSubmitJobsPerUser", "maxtrespu": "MaxTRESPerUser",
    "maxjobspa": "MaxJobsPerAccount", "maxsubmitpa": "MaxSubmitJobsPerAccount",
    "maxsubmitjobspa": "MaxSubmitJobsPerAccount", "maxtrespa": "MaxTRESPerAccount",
    "par name": "ParentName", "fairshare": "Share", "maxsubmitjobs": "MaxSubmit",
    "grpsubmitjobs": "GrpSubmit", "maxwalldurationperjob": "MaxWall"}
"""Short or alternative column and option names -> the name this model keeps."""
_EXPORT = {"qos": "sacctmgr show qos -P > qos.txt",
           "assoc": "sacctmgr show assoc -P > assoc.txt"}
_IDENTITY = {"name", "cluster", "account", "user", "partition", "parentname", "flags",
             "preempt", "preemptmode", "qos", "def qos", "id", "parentid", "lineage"}


def _column(name: str) -> str:
    return ALIASES.get(name.strip().lower(), name.strip())


def check_limit(key: str, value: str, where: str) -> None:
    """Refuse a value sacctmgr would refuse: a priority, share (or ``parent``), job or submit
    count that is not a whole number, a wall time that is not a time, a TRES list whose
    amounts are not numbers.

    Args:
        key: the column or option, by the long name (MaxJobsPerUser, GrpTRES, MaxWall ...).
        value: as written (``-1`` clears a limit in ``sacctmgr modify``).
        where: ``file:line:key`` or the change, for the message.
    """
    low = key.lower()
    if value in ("", "-1") or low in _IDENTITY:
        return
    if low in ("priority", "share"):
        if low == "priority" or value.lower() != "parent":  # Fairshare=parent
            slurm_uint(value, where, unlimited=False)
    elif "tres" in low:
        for tres, amount in param_list(value, lower=False).items():
            if amount is None or not amount:
                raise ConfigError(f"{where}: {tres} has no amount; write TRES=amount pairs, "
                                  "e.g. cpu=64,mem=256G,gres/gpu=4")
            if tres.lower() == "mem":
                memory_mib(amount, where)
            else:
                slurm_uint(amount, where)
    elif "wall" in low:
        slurm_seconds(value, where)
    elif "jobs" in low or "submit" in low or low == "maxnodes":
        slurm_uint(value, where)


def _rows(text: str, where: str, what: str,
          required: tuple[str, ...]) -> list[tuple[Source, dict[str, str]]]:
    lines = [(i, line) for i, line in enumerate(text.splitlines(), 1) if line.strip()]
    if not lines:
        raise ConfigError(f"{where}: empty; export it with `{_EXPORT[what]}`")
    header = [_column(c) for c in lines[0][1].split("|")]  # `-p`: a last, empty column
    missing = [c for c in required if c.lower() not in {h.lower() for h in header}]
    if missing or len(header) < 2:
        raise ConfigError(f"{where}:1: no {', '.join(missing) or 'pipe-separated'} column in "
                          f"the header; is it `{_EXPORT[what]}`?")
    out = []
    for number, line in lines[1:]:
        cells = line.split("|")
        if len(cells) != len(header):
            raise ConfigError(f"{where}:{number}: {len(cells)} fields for the {len(header)} "
                              f"columns of the header; is it `{_EXPORT[what]}`?")
        row = {h: c.strip() for h, c in zip(header, cells, strict=True)}
        for key, value in row.items():
            check_limit(key, value, f"{where}:{number}:{key}")
        out.append((Source(where, number), row))
    return out


def _pick(row: Mapping[str, str], name: str) -> str:
    return next((v for k, v in row.items() if k.lower() == name.lower()), "")


def loads_qos(text: str, where: str) -> dict[str, Qos]:
    """The QOS of a ``sacctmgr show qos -P`` dump's text (``where`` names it)."""
    out: dict[str, Qos] = {}
    for source, row in _rows(text, where, "qos", ("Name",)):
        name = _pick(row, "Name")
        priority = slurm_uint(_pick(row, "Priority") or "0", f"{source}:Priority") or 0
        limits = {k: v for k, v in row.items() if v and k.lower() not in ("name", "priority")}
        out[name] = Qos(name=name, priority=priority, limits=limits, source=source)
    return out


def loads_assoc(text: str, where: str) -> tuple[Association, ...]:
    """The associations of a ``sacctmgr show assoc -P`` dump's text."""
    out = []
    keep_out = {"cluster", "account", "user", "partition", "parentname", "share"}
    for source, row in _rows(text, where, "assoc", ("Account",)):
        out.append(Association(
            cluster=_pick(row, "Cluster"), account=_pick(row, "Account"),
            user=_pick(row, "User") or None, partition=_pick(row, "Partition") or None,
            parent=_pick(row, "ParentName") or (_pick(row, "Account") if _pick(row, "User")
                                                else None),
            shares=_pick(row, "Share") or "1",
            limits={k: v for k, v in row.items() if v and k.lower() not in keep_out},
            source=source))
    return tuple(out)


def read_sacctmgr_dir(folder: str | Path) -> tuple[dict[str, Qos], tuple[Association, ...]]:
    """The QOS (``qos.txt``) and associations (``assoc.txt``) dumped in ``folder``; a dump
    that is absent reads as none.

    Raises:
        ConfigError: the folder holds neither dump, or a dump is not sacctmgr's ``-P`` form.
    """
    folder = Path(folder)
    texts = {}
    for name in (QOS_FILE, ASSOC_FILE):
        path = folder / name
        try:
            texts[name] = path.read_text(encoding="utf-8") if path.exists() else None
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{path}: cannot read it: {exc}") from exc
    if not any(texts.values()):
        raise ConfigError(f"{folder}: neither {QOS_FILE} nor {ASSOC_FILE} there; write them "
                          f"with `{_EXPORT['qos']}` and `{_EXPORT['assoc']}`")
    qos_text, assoc_text = texts[QOS_FILE], texts[ASSOC_FILE]
    return (loads_qos(qos_text, str(folder / QOS_FILE)) if qos_text else {},
            loads_assoc(assoc_text, str(folder / ASSOC_FILE)) if assoc_text else ())


def with_accounting(config: SlurmConfig, folder: str | Path) -> SlurmConfig:
    """``config`` with the QOS and associations dumped in ``folder`` (see
    :func:`read_sacctmgr_dir`)."""
    qos, associations = read_sacctmgr_dir(folder)
    return replace(config, qos=qos, associations=associations)
