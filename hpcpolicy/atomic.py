"""Atomic output: write to a temporary file beside the target, then rename over it.

An interrupted run therefore never leaves a half-written file under the final name.

The outputs of one run that belong together (a job table with its rejects and ingest report; a
what-if report folder's files) are replaced together by :func:`replace_together`: every file is
written to a temporary name first; then a *commit journal* (``.NAME.commit``, listing the
renames) is written atomically, and only then are the files renamed into place and the journal
removed. The journal's appearance is the instant the new set becomes the current one:

* a run killed before it leaves the old files, untouched, and temporary files that the next run
  of the same output removes (:func:`remove_leftovers`);
* a run killed after it leaves the journal; whoever comes next (the next run, or
  :func:`hpcpolicy.table.open_job_table` reading the table) finishes the renames first
  (:func:`finish_commit`), so every reader that goes through hpcpolicy sees all the new files.

A program that reads the files directly sees a mix only if the run was killed in the
microseconds between the first and the last rename, and the journal beside them says so.
Temporary names carry the writer's process id (``.NAME.<pid>.<random>.part``), so that a
leftover is only removed once its writer is gone. Folders (a policy, a run) are built beside the
target and swapped in by :func:`replace_dir`, in one step where Linux allows it.

Every writer here holds its outputs' locks (:mod:`hpcpolicy.outlock`) while it writes, and a
command claims them before it looks whether they exist (:func:`claim_outputs`): two runs of
the same output never both pass that check, and two sets replaced at once never mix. A reader
finishes a dead writer's commit under the same lock, never one still under way.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import errno
import hashlib
import json
import os
import re
import shutil
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from hpcpolicy.errors import ConfigError, OutputBusyError
from hpcpolicy.outlock import WAIT_S, claim, holding, release

__all__ = [
    "as_os_error",
    "atomic_path",
    "build_dir",
    "claim_outputs",
    "file_sha256",
    "finish_commit",
    "journal_for",
    "json_text",
    "remove_leftovers",
    "replace_dir",
    "replace_together",
    "write_json",
    "write_text",
]

_OS_ERROR = re.compile(r"\(os error (\d+)\)")
_LEGACY_RANDOM = re.compile(r"^[a-z0-9_]{8}$")
_KINDS = (".part", ".build", ".old")


def as_os_error(exc: BaseException, where: Path) -> BaseException:
    """``exc`` as an :class:`OSError` naming ``where`` when it comes from the file system and
    names no file (Polars' writers report a full disk as a ComputeError "... (os error 28)"),
    else ``exc`` itself. Errors of hpcpolicy's own, which already say where, are kept."""
    from hpcpolicy.errors import HpcPolicyError

    if isinstance(exc, HpcPolicyError) or (isinstance(exc, OSError) and exc.filename):
        return exc
    if isinstance(exc, OSError):
        code = exc.errno
    else:
        found = _OS_ERROR.search(str(exc))
        code = int(found.group(1)) if found else None
    if code is None:
        return exc
    return OSError(code, os.strerror(code), str(where))


def _prefix(target: Path) -> str:
    """The start of this process's temporary names for ``target``."""
    return f".{target.name}.{os.getpid()}."


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    return True


def _stale(target: Path, sibling: str) -> bool:
    """Whether ``sibling`` is a temporary file or folder of ``target`` whose writer is gone:
    ``.NAME.<pid>.<random><kind>``, or ``.NAME.<random>`` of versions before the pid."""
    head = f".{target.name}."
    if not sibling.startswith(head):
        return False
    rest = sibling[len(head):]
    for kind in _KINDS:
        rest = rest.removesuffix(kind)
    parts = rest.split(".")
    if len(parts) == 1:
        return _LEGACY_RANDOM.match(parts[0]) is not None
    return len(parts) == 2 and parts[0].isdigit() and not _alive(int(parts[0]))


def remove_leftovers(target: str | os.PathLike[str]) -> list[Path]:
    """Remove what interrupted runs left beside ``target``; return what was removed.

    An unfinished commit of ``target``'s set is finished first (:func:`finish_commit`), and
    an old folder that :func:`replace_dir` had moved aside is put back if ``target`` is
    missing; then temporary files and build folders of ``target`` (and of its journal) whose
    writer is no longer running go.
    """
    target = Path(target)
    journal = journal_for(target)
    finish_commit(journal)
    removed = []
    with contextlib.suppress(FileNotFoundError):
        for entry in sorted(os.scandir(target.parent), key=lambda e: e.name):
            if not (_stale(target, entry.name) or _stale(journal, entry.name)):
                continue
            path = Path(entry.path)
            if entry.name.endswith(".old") and not target.exists() and (
                    path / target.name).exists():  # killed between replace_dir's renames
                os.replace(path / target.name, target)
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
            removed.append(path)
    return removed


def journal_for(primary: str | os.PathLike[str]) -> Path:
    """The commit journal of the output set whose first file is ``primary``."""
    primary = Path(primary)
    return primary.with_name(f".{primary.name}.commit")


def claim_outputs(*targets: str | os.PathLike[str] | None, overwrite: bool) -> None:
    """Claim the outputs ``targets`` for this run (:func:`hpcpolicy.outlock.claim`; None: an
    option not given), then refuse the first that exists unless ``overwrite``. Call it before
    any work: the claim holds until the output is written (or released, or the command or
    process ends), so no other run passes the same check meanwhile.

    Raises:
        OutputBusyError: another run is writing one of them.
        ConfigError: one exists and ``overwrite`` is off.

    Example:
        >>> import tempfile, pathlib
        >>> d = pathlib.Path(tempfile.mkdtemp())
        >>> claim_outputs(d / "out.json", None, overwrite=False)
        >>> write_text(d / "out.json", "{}")  # the claim ends once the output is written
    """
    claim(*targets)
    for target in targets:
        if target is not None and Path(target).exists() and not overwrite:
            release(*targets)
            raise ConfigError(f"{target} already exists; pass --overwrite to replace it")


def _primary_of(journal: Path) -> Path:
    """The first file of the set whose journal is ``journal`` (``.NAME.commit``)."""
    return journal.with_name(journal.name.removeprefix(".").removesuffix(".commit"))


def finish_commit(journal: str | os.PathLike[str]) -> bool:
    """Finish the renames of an interrupted commit, if ``journal`` is there; return whether
    there was one. Safe to repeat: a rename already done is skipped.

    It is done under the set's lock: while a live writer holds it, that writer is renaming
    and will remove the journal itself, so this waits for it (up to
    :data:`hpcpolicy.outlock.WAIT_S` seconds) and finishes nothing. A reader that cannot
    lock the folder (no permission, a read-only mount) leaves the journal as it is."""
    journal = Path(journal)
    deadline = time.monotonic() + WAIT_S
    while (plan := _plan(journal)) is not None:
        members = [journal.parent / name for _, name in plan["replace"]]
        try:  # the whole set: the dead writer's lock files go too
            with holding([_primary_of(journal), *members,
                          *(journal.parent / name for name in plan["remove"])],
                         wait_s=0.0, written=False):
                return _roll_forward(journal)
        except OutputBusyError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.01)
        except OSError:  # nothing may be written here (permissions, a read-only mount)
            return False
    return False


def _plan(journal: Path) -> dict[str, list[Any]] | None:
    """The renames and removals ``journal`` lists; None if it is gone or not one of ours (not
    JSON of that shape, or naming files outside its folder)."""
    from hpcpolicy.docload import read_json
    from hpcpolicy.errors import HpcPolicyError

    try:
        plan = read_json(journal, "commit journal")
    except HpcPolicyError:
        return None
    if not (isinstance(plan, dict) and isinstance(plan.get("replace"), list)
            and isinstance(plan.get("remove", []), list)
            and all(isinstance(p, list) and len(p) == 2 for p in plan["replace"])):
        return None
    names = [n for pair in plan["replace"] for n in pair] + list(plan.get("remove", []))
    if not all(isinstance(n, str) and n not in ("", ".", "..") and Path(n).name == n
               for n in names):
        return None  # it would rename files outside its folder
    return {"replace": plan["replace"], "remove": list(plan.get("remove", []))}


def _roll_forward(journal: Path) -> bool:
    """Do the renames and removals ``journal`` lists (its writer's locks held); False if it
    is gone or not one of ours."""
    plan = _plan(journal)
    if plan is None:
        return False
    folder = journal.parent
    for tmp, name in plan["replace"]:
        if (folder / tmp).exists():
            os.replace(folder / tmp, folder / name)
    for name in plan["remove"]:
        (folder / name).unlink(missing_ok=True)
    journal.unlink(missing_ok=True)
    return True


@contextlib.contextmanager
def replace_together(targets: Sequence[str | os.PathLike[str]],
                     remove: Sequence[str | os.PathLike[str]] = ()) -> Iterator[list[Path]]:
    """Yield one temporary path per target (all in one folder); on success, replace the
    targets together and delete ``remove`` (files the new set no longer has).

    Leftovers of interrupted runs of the same targets are removed first. On an exception
    the temporary files are removed and the old files stay as they were; an error from the
    file system (a full disk) is raised as an :class:`OSError` naming the folder. The
    journal is named after the first target (:func:`journal_for`); see the module docstring.

    Example:
        >>> import tempfile, pathlib
        >>> d = pathlib.Path(tempfile.mkdtemp())
        >>> with replace_together([d / "a.txt", d / "b.txt"]) as (a, b):
        ...     _ = a.write_text("1"), b.write_text("2")
        >>> sorted(p.name for p in d.iterdir())
        ['a.txt', 'b.txt']
    """
    paths = [Path(t) for t in targets]
    folder = paths[0].parent
    if any(p.parent != folder for p in paths) or any(Path(r).parent != folder for r in remove):
        raise ValueError("replace_together: every file must be in one folder")
    with holding([*paths, *remove]):  # the whole set, so that two commits never interleave
        yield from _replace_locked(paths, remove)


def _replace_locked(paths: list[Path], remove: Sequence[str | os.PathLike[str]],
                    ) -> Iterator[list[Path]]:
    """:func:`replace_together`'s work, once its locks are held."""
    folder = paths[0].parent
    folder.mkdir(parents=True, exist_ok=True)
    for p in [*paths, *map(Path, remove)]:  # a file the set drops leaves no litter either
        remove_leftovers(p)
    tmps: list[Path] = []
    try:
        for p in paths:
            fd, name = tempfile.mkstemp(prefix=_prefix(p), suffix=".part", dir=folder)
            os.close(fd)
            tmps.append(Path(name))
        yield tmps
        mode = 0o666 & ~_umask()
        for tmp in tmps:
            os.chmod(tmp, mode)  # mkstemp makes 0600 files; give outputs the usual mode
        journal = journal_for(paths[0])
        with _staged(journal) as staged:  # the journal is under the set's lock already
            staged.write_text(json_text({
            "replace": [[t.name, p.name] for t, p in zip(tmps, paths, strict=True)],
                "remove": [Path(r).name for r in remove]}), encoding="utf-8")
    except BaseException as exc:
        for tmp in tmps:
            tmp.unlink(missing_ok=True)
        converted = as_os_error(exc, folder)
        if converted is exc:
            raise
        raise converted from exc
    _roll_forward(journal)


@contextlib.contextmanager
def atomic_path(target: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path in the target's folder; rename it to ``target`` on success.

    On any exception the temporary file is removed and the target is left untouched. The
    target's lock is held meanwhile (:func:`hpcpolicy.outlock.holding`).

    Raises:
        OutputBusyError: another run is writing ``target``.

    Example:
        >>> import tempfile, pathlib
        >>> d = pathlib.Path(tempfile.mkdtemp())
        >>> with atomic_path(d / "x.txt") as tmp:
        ...     _ = tmp.write_text("done")
        >>> (d / "x.txt").read_text()
        'done'
    """
    with holding([target]), _staged(Path(target)) as tmp:
        yield tmp


@contextlib.contextmanager
def _staged(target: Path) -> Iterator[Path]:
    """:func:`atomic_path` without taking the lock (its caller holds it)."""
    tmp: Path | None = None
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(prefix=_prefix(target), suffix=".part", dir=target.parent)
        os.close(fd)
        tmp = Path(name)
        yield tmp
        if tmp.exists():  # mkstemp makes 0600 files; give outputs the usual umask mode
            os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, target)
    except BaseException as exc:
        if tmp is not None:
            tmp.unlink(missing_ok=True)
        converted = as_os_error(exc, target)
        if converted is exc:
            raise
        raise converted from exc


def build_dir(target: str | os.PathLike[str]) -> Path:
    """A new, empty folder beside ``target`` to build it in (then :func:`replace_dir`), once
    the build folders of interrupted runs are removed."""
    target = Path(target)
    claim(target)  # until replace_dir has put the folder in place
    remove_leftovers(target)
    return Path(tempfile.mkdtemp(prefix=_prefix(target), suffix=".build", dir=target.parent))


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths in one step (Linux ``renameat2(RENAME_EXCHANGE)``); False where the
    system cannot."""
    libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
    renameat2 = getattr(libc, "renameat2", None)
    if renameat2 is None:
        return False
    at_fdcwd, rename_exchange = -100, 2
    if renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.EPERM):  # the file system cannot swap
        return False
    raise OSError(code, os.strerror(code), str(b))


def replace_dir(build: str | os.PathLike[str], target: str | os.PathLike[str]) -> None:
    """Move the finished folder ``build`` to ``target``, replacing an older one.

    Where Linux allows it the two are swapped in one step; otherwise the old folder is
    renamed aside first, then ``build`` into place, and a run killed in between leaves the
    old folder beside the target (``.NAME.<pid>.<random>.old``) for :func:`remove_leftovers`
    to put back. A reader sees the old folder or the new one, never a mix. Both must be on
    one file system.
    """
    build, target = Path(build), Path(target)
    with holding([target]):
        _swap_in(build, target)


def _swap_in(build: Path, target: Path) -> None:
    """:func:`replace_dir`'s renames, under the target's lock."""
    if target.exists() and _exchange(build, target):
        shutil.rmtree(build, ignore_errors=True)  # now the old folder
        return
    old = None
    if target.exists():
        old = Path(tempfile.mkdtemp(prefix=_prefix(target), suffix=".old", dir=target.parent))
        os.replace(target, old / target.name)
    os.replace(build, target)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def _umask() -> int:
    """The process umask (read by setting and restoring it)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_text(target: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` (UTF-8) to ``target`` atomically."""
    with atomic_path(target) as tmp:
        tmp.write_text(text, encoding="utf-8")


def json_text(obj: Any) -> str:
    """``obj`` as the indented, key-sorted JSON text that :func:`write_json` writes."""
    return json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n"


def write_json(target: str | os.PathLike[str], obj: Any) -> None:
    """Write ``obj`` as indented, key-sorted JSON to ``target`` atomically."""
    write_text(target, json_text(obj))


def file_sha256(path: str | os.PathLike[str], chunk: int = 1 << 20) -> str:
    """Hex SHA-256 of a file's bytes, read in chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()
