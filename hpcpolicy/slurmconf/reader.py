"""slurm.conf as Slurm's own reader sees it: logical lines of ``Key=Value`` pairs, includes inlined.

The rules are those of ``src/common/parse_config.c`` (SchedMD/slurm at 284c3b95):

* a ``#`` preceded by an even number of backslashes starts a comment, even inside quotes
  (``_strip_comments`` does not look at quotes: write ``\\#`` for a literal ``#``);
* an odd number of backslashes at the end of a line (trailing blanks allowed) joins the next
  line to it (``_strip_continuation``), then every ``\\x`` becomes ``x`` (``_strip_escapes``);
* a pair is ``Key=Value`` or ``Key="value with blanks"`` (``keyvalue_pattern``); keys are
  case-insensitive;
* a line holds one pair, except the lines whose key takes the rest of the line
  (:data:`LINE_KEYS`: ``NodeName=``, ``PartitionName=``, ...); anything else left over is
  Slurm's "Parse error";
* ``Include FILE`` reads FILE in place (``_parse_include_directive``); ``%c`` in its name is
  the ClusterName read so far; a relative name is relative to the directory of the main
  slurm.conf (``get_extra_conf_path``), not of the including file; a name with ``*`` is
  refused (Slurm reports "does not support glob parsing" and fails the include).

Includes nest at most :data:`MAX_INCLUDE_DEPTH` deep and a file including itself (directly or
not) is refused: Slurm would recurse until it runs out of memory.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from hpcpolicy.errors import ConfigError
from hpcpolicy.slurmconf.model import Setting, Source

__all__ = ["LINE_KEYS", "MAX_CONF_BYTES", "MAX_INCLUDE_DEPTH", "Line", "comment_start",
           "read_lines", "split_pairs"]

MAX_INCLUDE_DEPTH = 16
"""Deepest chain of Include lines read (real sites use one or two levels)."""
MAX_CONF_BYTES = 16 * 2**20
"""Most bytes read for one slurm.conf, its includes counted each time they are included
(16 MiB: far above any real configuration, and a file included over and over stops here)."""
LINE_KEYS = frozenset({"nodename", "partitionname", "downnodes", "nodeset", "poweraction"})
"""Keys whose handler reads more pairs from the rest of the line (read_config.c)."""

_PAIR = re.compile(r'\s*([A-Za-z0-9_.]+)\s*[-*+/]?=\s*(?:"([^"]*)"|(\S+))(?:\s|$)')
_INCLUDE = re.compile(r"^include\s+(\S+)\s*$", re.IGNORECASE)


@dataclass(frozen=True)
class Line:
    """One logical line: its pairs in order (the first names what the line defines)."""

    pairs: tuple[Setting, ...]
    source: Source


def comment_start(line: str) -> int:
    """Where the comment of a physical line starts (its length when it has none): the first
    ``#`` preceded by an even number of backslashes."""
    at = line.find("#")
    while at >= 0:
        before = line[:at]
        if (len(before) - len(before.rstrip("\\"))) % 2 == 0:
            return at
        at = line.find("#", at + 1)
    return len(line)


def _continued(line: str) -> str | None:
    """The line without its continuation backslash, or None when it does not continue."""
    body = line.rstrip()
    trailing = len(body) - len(body.rstrip("\\"))
    return body[:-1] if trailing % 2 else None


def _logical_lines(text: str) -> Iterator[tuple[int, int, str]]:
    """(first line number, physical lines used, text) of every non-empty logical line."""
    start, buffer = 0, ""
    lines = text.splitlines()
    for number, raw in enumerate(lines, 1):
        start = start or number
        stripped = raw[:comment_start(raw)]
        joined = _continued(stripped)
        if joined is not None and number < len(lines):
            buffer += joined
            continue
        buffer += stripped if joined is None else joined
        logical = re.sub(r"\\(.)", r"\1", buffer)
        if logical.strip():
            yield start, number - start + 1, logical
        start, buffer = 0, ""


def split_pairs(text: str, source: Source) -> tuple[Setting, ...]:
    """The ``Key=Value`` pairs of one logical line, as Slurm's reader takes them.

    Raises:
        ConfigError: the line does not start with a pair, or more is left than its key
            allows (one pair, or pairs only, for :data:`LINE_KEYS`).
    """
    pairs: list[Setting] = []
    rest = text
    while (m := _PAIR.match(rest)) is not None:
        value = m[2] if m[2] is not None else m[3]
        pairs.append(Setting(m[1], value, source))
        rest = rest[m.end():]
        if pairs[0].key.lower() not in LINE_KEYS:
            break
    if not pairs:
        raise ConfigError(f"{source}: {text.strip()[:60]!r} is not Key=Value; Slurm stops "
                          "here (comment it out with #, or write Key=Value)")
    if rest.strip():
        fix = ("put each key on its own line" if pairs[0].key.lower() not in LINE_KEYS
               else "quote a value that holds blanks: Key=\"a b\"")
        raise ConfigError(f"{source}: {rest.strip()[:60]!r} left after "
                          f"{pairs[-1].key}={pairs[-1].value}; Slurm reports a parse error: "
                          f"{fix}")
    return tuple(pairs)


def _read_text(path: Path, where: str, left: int) -> str:
    """The file's text; ``where`` is the Include line that names it (or the path itself),
    ``left`` the bytes the configuration may still read."""
    head = str(path) if where == str(path) else f"{where}: {path}"
    try:
        size = path.stat().st_size
        if size > left:
            raise ConfigError(f"{head}: the configuration would pass {MAX_CONF_BYTES // 2**20} "
                              "MiB with this file (its includes counted each time); is it "
                              "the right file, or is a file included over and over?")
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{head}: cannot read it: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{head}: not UTF-8 text (byte {exc.start}); is it a "
                          "slurm.conf?") from exc


def _include_path(name: str, source: Source, main: Path, cluster: str | None) -> Path:
    if "%c" in name:
        if cluster is None:
            raise ConfigError(f"{source}: Include {name} uses %c before ClusterName is "
                              "set; set ClusterName above this line")
        name = name.replace("%c", cluster)
    if "*" in name:
        raise ConfigError(f"{source}: Include {name}: Slurm does not read glob patterns "
                          "in slurm.conf; write one Include line per file")
    path = Path(name)
    return path if path.is_absolute() else main.parent / path


def read_lines(main: Path) -> tuple[list[Line], dict[str, str]]:
    """Every logical line of ``main`` and the files it includes, in Slurm's order.

    Returns:
        The lines, and the text of every file read by the name its :class:`Source` carries
        (the main file first; the diff edits these texts).

    Raises:
        ConfigError: a file cannot be read, a line is not ``Key=Value``, an include is
            missing, globbed, cyclic or nested more than :data:`MAX_INCLUDE_DEPTH` deep.
    """
    out: list[Line] = []
    texts: dict[str, str] = {}
    _read_into(main, main, (texts, out, [MAX_CONF_BYTES]), (), str(main))
    return out, texts


def _read_into(path: Path, main: Path, into: tuple[dict[str, str], list[Line], list[int]],
               chain: tuple[Path, ...], where: str) -> None:
    texts, out, budget = into
    resolved = path.resolve()
    if resolved in chain:
        raise ConfigError(f"{where}: Include {path} includes itself (through "
                          f"{' -> '.join(p.name for p in (*chain, resolved))}); remove the cycle")
    if len(chain) >= MAX_INCLUDE_DEPTH:
        raise ConfigError(f"{where}: Include {path} is nested more than {MAX_INCLUDE_DEPTH} "
                          "deep; flatten the includes")
    texts[str(path)] = _read_text(path, where, budget[0])
    budget[0] -= len(texts[str(path)].encode())
    for first, span, logical in _logical_lines(texts[str(path)]):
        source = Source(str(path), first, span)
        include = _INCLUDE.match(logical)
        if include is None:
            out.append(Line(split_pairs(logical, source), source))
            continue
        cluster = next((line.pairs[0].value for line in reversed(out)
                        if line.pairs[0].key.lower() == "clustername"), None)
        target = _include_path(include[1], source, main, cluster)
        _read_into(target, main, into, (*chain, resolved), str(source))
