"""Slurm's value syntax: durations, whole numbers, booleans, memory sizes and comma lists.

Each reader follows the C function in Slurm's source that reads the same value (SchedMD/slurm
at 284c3b95, read with the ``fetch`` tool), so a value this module accepts is one Slurm
accepts, and one it refuses ends in one :class:`~hpcpolicy.errors.ConfigError` line naming
where the value was written (``where``: ``slurm.conf:12``) and how to write it instead:

* :func:`slurm_seconds` is ``time_str2secs`` (src/common/parse_time.c): ``UNLIMITED``,
  ``INFINITE`` or ``-1``; ``MM``; ``MM:SS``; ``HH:MM:SS``; ``D-HH``; ``D-HH:MM``;
  ``D-HH:MM:SS``; and :func:`slurm_minutes` rounds up to whole minutes as ``time_str2mins``;
* :func:`slurm_uint` is ``s_p_handle_uint32`` (src/common/parse_value.c): decimal, hex or
  octal as ``strtoul`` reads them, an optional ``k`` (times 1024), ``UNLIMITED``/``INFINITE``;
* :func:`slurm_bool` is ``s_p_handle_boolean``: yes/up/true/1 and no/down/false/0;
* :func:`param_list` splits ``SchedulerParameters``-style lists (``a,b=1``).

Example:
    >>> slurm_seconds("1-12:00:00", "x"), slurm_seconds("90", "x"), slurm_seconds("02:30", "x")
    (129600, 5400, 150)
    >>> slurm_minutes("14-0", "x"), slurm_seconds("UNLIMITED", "x") is None
    (20160, True)
"""

from __future__ import annotations

import re

from hpcpolicy.errors import ConfigError

__all__ = ["TIME_HINT", "memory_mib", "param_list", "slurm_bool", "slurm_minutes",
           "slurm_seconds", "slurm_uint"]

TIME_HINT = "Slurm writes a time as minutes, MM:SS, HH:MM:SS, D-HH[:MM[:SS]] or UNLIMITED"
"""How to write a duration Slurm reads, for messages refusing one."""

_UINT32_MAX = 0xFFFFFFFF
_TRUE = frozenset({"yes", "up", "true", "1"})
_FALSE = frozenset({"no", "down", "false", "0"})
_UNLIMITED = frozenset({"unlimited", "infinite"})
_MEMORY = re.compile(r"^(\d+(?:\.\d+)?)([KMGTP]?)B?$", re.IGNORECASE)
_MEMORY_SCALE = {"K": 1 / 1024, "": 1, "M": 1, "G": 1024, "T": 1024**2, "P": 1024**3}


def _valid_timespec(text: str) -> bool:
    """Slurm's ``_is_valid_timespec``: digits, at most one dash, at most two colons, and
    enough digit groups for the separators used."""
    if re.fullmatch(r"[0-9:-]*", text) is None:
        return False
    groups = len(re.findall(r"\d+", text))
    dashes, colons = text.count("-"), text.count(":")
    if not groups or dashes > 1 or colons > 2 or (dashes and ":" in text.split("-")[0]):
        return False
    need = {0: 0, 1: 3 if dashes else 2, 2: 4 if dashes else 3}[colons]
    return groups >= need


def slurm_seconds(text: str, where: str) -> int | None:
    """Seconds of a Slurm duration, None for unlimited (``UNLIMITED``, ``INFINITE``, ``-1``).

    Raises:
        ConfigError: not a duration Slurm reads; the message names ``where``.
    """
    value = text.strip()
    if value.lower() in _UNLIMITED or value == "-1":
        return None
    if value.startswith("-") or not _valid_timespec(value):
        raise ConfigError(f"{where}: {text!r} is not a time; {TIME_HINT}")
    if "-" in value:
        days, _, rest = value.partition("-")
        parts = [int(p) for p in rest.split(":") if p] + [0, 0, 0]
        return int(days) * 86400 + parts[0] * 3600 + parts[1] * 60 + parts[2]
    parts = [int(p) for p in value.split(":")]
    if len(parts) == 3:
        return parts[0] * 3600 + parts[1] * 60 + parts[2]
    return parts[0] * 60 + (parts[1] if len(parts) == 2 else 0)


def slurm_minutes(text: str, where: str) -> int | None:
    """Whole minutes of a Slurm duration, rounded up as ``time_str2mins``; None for unlimited."""
    seconds = slurm_seconds(text, where)
    return None if seconds is None else -(-seconds // 60)


def slurm_uint(text: str, where: str, unlimited: bool = True) -> int | None:
    """A non-negative whole number as Slurm reads a ``uint32`` option; None for unlimited.

    Args:
        text: the value as written.
        where: ``file:line:key`` (or the change), for the message.
        unlimited: whether ``UNLIMITED``/``INFINITE`` may be written.

    Raises:
        ConfigError: negative, above 4294967295, or not a number.
    """
    value = text.strip()
    if value.lower() in _UNLIMITED and unlimited:
        return None
    number = re.fullmatch(r"(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9]\d*)([kK]?)", value)
    if number is None:
        raise ConfigError(f"{where}: {text!r} is not a whole number >= 0; write e.g. 1000")
    digits = number[1]
    base = 16 if digits[:2].lower() == "0x" else 8 if digits.startswith("0") else 10
    result = int(digits, base) * (1024 if number[2] else 1)
    if result > _UINT32_MAX:
        raise ConfigError(f"{where}: {text!r} is greater than {_UINT32_MAX}, Slurm's largest")
    return result


def slurm_bool(text: str, where: str) -> bool:
    """A Slurm boolean: yes/up/true/1 or no/down/false/0, in any case."""
    value = text.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ConfigError(f"{where}: {text!r} is not a boolean; write YES or NO")


def memory_mib(text: str, where: str) -> float:
    """A memory size in MiB: a bare number is MiB (as ``RealMemory``), or with a K, M, G, T
    or P suffix (as sacctmgr writes ``mem=100G``)."""
    size = _MEMORY.match(text.strip())
    if size is None:
        raise ConfigError(f"{where}: {text!r} is not a memory size; write e.g. 64000 or 64G")
    return float(size[1]) * _MEMORY_SCALE[size[2].upper()]


def param_list(text: str, lower: bool = True) -> dict[str, str | None]:
    """``a,b=1,c=x`` as ``{"a": None, "b": "1", "c": "x"}`` (keys lower-cased unless
    ``lower`` is False, order kept; a key written twice keeps its first value, the one
    Slurm's ``xstrcasestr`` finds)."""
    out: dict[str, str | None] = {}
    for item in text.split(","):
        key, eq, value = item.strip().partition("=")
        if key:
            out.setdefault(key.lower() if lower else key, value if eq else None)
    return out
