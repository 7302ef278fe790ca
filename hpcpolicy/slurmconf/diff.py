"""The slurm.conf side of a change as a unified diff that applies to the files it was made from.

A changed key is edited where it was written (the file and line its :class:`Source` names,
an included file included): its value is replaced in place, comments and the other pairs of
the line kept; a key the line lacks is added at its end; a whole-file key the configuration
lacks is added at the end of the main slurm.conf. A whole new file (``conf:``) is diffed as a
whole. Paths in the diff are relative to the main file's folder, so
``patch -p1 -d <that folder> < change.diff`` applies it.

Example:
    >>> import pathlib, tempfile
    >>> from hpcpolicy.slurmconf.apply import apply_candidate
    >>> from hpcpolicy.slurmconf.build import read_slurm_conf
    >>> conf = pathlib.Path(tempfile.mkdtemp()) / "slurm.conf"
    >>> _ = conf.write_text("PriorityWeightAge=1000  # old\\n")
    >>> old = read_slurm_conf(conf)
    >>> print(conf_diff(old, apply_candidate(old, "PriorityWeightAge=5000")), end="")
    --- a/slurm.conf
    +++ b/slurm.conf
    @@ -1 +1 @@
    -PriorityWeightAge=1000  # old
    +PriorityWeightAge=5000  # old
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Iterator

from hpcpolicy.slurmconf.model import SlurmConfig, Source
from hpcpolicy.slurmconf.reader import comment_start

__all__ = ["conf_diff", "written"]


def written(value: str) -> str:
    """A value as slurm.conf needs it: quoted when it holds blanks, ``#`` escaped."""
    value = value.replace("#", "\\#")
    return f'"{value}"' if re.search(r"\s", value) else value


def _set_in(lines: list[str], source: Source, key: str, value: str) -> None:
    """Set ``key`` on the logical line at ``source`` in ``lines`` (physical, with ends)."""
    pattern = re.compile(rf"(^|\s)({re.escape(key)})(\s*=\s*)(\"[^\"]*\"|[^\s#]+)",
                         re.IGNORECASE)
    first = source.line - 1
    for n in range(first, first + source.span):
        body_end = comment_start(lines[n])
        m = pattern.search(lines[n][:body_end])
        if m is not None:
            lines[n] = lines[n][:m.start(4)] + written(value) + lines[n][m.end(4):]
            return
    last = first + source.span - 1
    body = lines[last][:comment_start(lines[last])].rstrip("\r\n")
    content = body.rstrip()
    lines[last] = f"{content} {key}={written(value)}{lines[last][len(content):]}"


def _edited(old: SlurmConfig, new: SlurmConfig) -> dict[str, list[str]]:
    """Every file of ``old`` with ``new``'s values written in (physical lines, with ends)."""
    files = {f: text.splitlines(keepends=True) for f, text in old.files.items()}
    main = next(iter(old.files))
    for key, setting in new.settings.items():
        was = old.settings.get(key)
        if was is not None and was.value != setting.value:
            _set_in(files[was.source.file], was.source, was.key, setting.value)
        elif was is None:
            lines = files[main]
            if lines and not lines[-1].endswith("\n"):
                lines[-1] += "\n"
            lines.append(f"{key}={written(setting.value)}\n")
    for name, part in new.partitions.items():
        before = old.partitions[name].settings
        for key, setting in part.settings.items():
            if key not in before or before[key].value != setting.value:
                _set_in(files[part.source.file], part.source, key, setting.value)
    return files


def _unified(old: list[str], new: list[str], name: str) -> Iterator[str]:
    for line in difflib.unified_diff(old, new, f"a/{name}", f"b/{name}"):
        yield line if line.endswith("\n") else line + "\n\\ No newline at end of file\n"


def conf_diff(old: SlurmConfig, new: SlurmConfig) -> str:
    """The unified diff from ``old``'s files to ``new``'s slurm.conf (empty when the change
    touches only QOS or associations).

    Args:
        old: the configuration as read (its ``files`` hold the text the diff applies to).
        new: ``old`` with a candidate applied (:func:`~hpcpolicy.slurmconf.apply_candidate`).
    """
    main = next(iter(old.files))
    folder = os.path.dirname(os.path.abspath(main))

    def name(path: str) -> str:
        rel = os.path.relpath(os.path.abspath(path), folder)
        return path if rel.startswith("..") else rel

    if next(iter(new.files)) != main:  # a whole new slurm.conf
        replaced = next(iter(new.files.values()))
        return "".join(_unified(old.files[main].splitlines(keepends=True),
                                replaced.splitlines(keepends=True), name(main)))
    edited = _edited(old, new)
    return "".join(line for path, text in old.files.items()
                   for line in _unified(text.splitlines(keepends=True), edited[path],
                                        name(path)))
