"""Output locks: one run at a time writes an output, so that a refusal to overwrite holds.

Each output ``NAME`` has an advisory lock (``fcntl.flock``) on a lock file beside it,
``.NAME.lock``, which holds the pid of the run that has it. A run takes it *before* it looks
whether ``NAME`` exists (:func:`claim`), keeps it while it works, and gives it up once it has
written ``NAME`` (:func:`holding`, which every writer in :mod:`hpcpolicy.atomic` goes
through) or when it exits; the lock file goes with it. A second run that wants ``NAME``
meanwhile is refused in one line naming the first one's pid, instead of passing the same
existence check and replacing the first run's result unseen.

The kernel drops a killed run's lock at once; the lock file it leaves behind is taken over by
the next run of that output. Within one process the lock is held once (a run checks, then
writes; a command's claims end with it) and threads writing the same output take turns.
Where the file system has no locks (``ENOLCK``), outputs are written unlocked, as before.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import fcntl
import os
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from hpcpolicy.errors import OutputBusyError

__all__ = ["WAIT_S", "claim", "end_claims", "holding", "lock_path", "release"]

WAIT_S = 10.0
"""How long a writer that has not claimed its output waits for another run's lock before it
gives up: long enough for another run's commit (milliseconds), short against a run that
claimed the output at its start."""

_NO_LOCKS = (errno.ENOLCK, errno.EOPNOTSUPP)


@dataclass
class _Lock:
    path: Path
    """The lock file."""
    fd: int
    """Holds the flock; -1 where the file system has no locks."""
    mutex: threading.RLock = field(default_factory=threading.RLock)
    """Threads of this process writing the output take turns."""
    users: int = 0
    """Writers and readers holding it now."""
    claimed: bool = False
    """Claimed by this run before its existence check: kept until the output is written."""


_HELD: dict[Path, _Lock] = {}
_GUARD = threading.Lock()


def lock_path(target: str | os.PathLike[str]) -> Path:
    """The lock file of the output ``target`` (``.NAME.lock`` beside it)."""
    target = Path(target)
    return target.with_name(f".{target.name}.lock")


def _open_locked(lock: Path) -> int | None:
    """A descriptor holding ``lock``'s flock, -1 where the file system has no locks, or None
    while another process holds it."""
    while True:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        except OSError as exc:
            os.close(fd)
            if exc.errno in _NO_LOCKS:
                return -1
            raise
        try:
            current = os.path.samestat(os.fstat(fd), os.stat(lock))
        except FileNotFoundError:
            current = False
        if current:
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode())
            return fd
        os.close(fd)  # its holder removed it as it let go: lock the file there now


def _busy(target: Path) -> OutputBusyError:
    try:
        pid = lock_path(target).read_text(encoding="utf-8").strip()
    except OSError:
        pid = ""
    who = f"another run (pid {pid})" if pid.isdigit() else "another run"
    return OutputBusyError(f"{target} is being written by {who}; wait for it to finish or "
                           "choose another -o")


def _take(target: Path, wait_s: float, *, claim: bool) -> _Lock:
    """This process's lock of ``target``, taken now if not held yet (waiting up to ``wait_s``
    for another process to let go), with one more user unless ``claim``."""
    key = Path(os.path.abspath(target))
    deadline = time.monotonic() + wait_s
    while True:
        with _GUARD:
            held = _HELD.get(key)
            if held is None:
                key.parent.mkdir(parents=True, exist_ok=True)
                fd = _open_locked(lock_path(key))
                if fd is not None:
                    held = _HELD[key] = _Lock(lock_path(key), fd)
            if held is not None:
                held.claimed |= claim
                held.users += not claim
                return held
        if time.monotonic() >= deadline:
            raise _busy(target)
        time.sleep(0.01)


def _let_go(key: Path, held: _Lock) -> None:
    """Close and remove the lock file (under ``_GUARD``), so that the next run starts clean."""
    if held.fd >= 0:
        with contextlib.suppress(FileNotFoundError):
            held.path.unlink()  # while still locked: no one else can be holding this file
        os.close(held.fd)
    del _HELD[key]


def claim(*targets: str | os.PathLike[str] | None) -> None:
    """Take the lock of each output in ``targets`` for this run (None: an option not given),
    before looking whether it exists; it is kept until the output is written or the run ends.

    Raises:
        OutputBusyError: another run holds one of them (the message names its pid); none of
            them is claimed then.
    """
    taken: list[Path] = []
    try:
        for target in targets:
            if target is None:
                continue
            key = Path(os.path.abspath(target))
            fresh = key not in _HELD or not _HELD[key].claimed
            _take(Path(target), 0.0, claim=True)
            if fresh:
                taken.append(key)
    except OutputBusyError:
        release(*taken)
        raise


@contextlib.contextmanager
def holding(targets: Iterable[str | os.PathLike[str]], *, wait_s: float = WAIT_S,
            written: bool = True) -> Iterator[None]:
    """Hold the locks of ``targets`` (this run's claims, or taken now, waiting up to ``wait_s``
    for another run) and their turn among this process's threads; let them go after, and
    end the claims once they are ``written``.

    Raises:
        OutputBusyError: another run still holds one after ``wait_s`` seconds.
    """
    keys = sorted({Path(os.path.abspath(t)) for t in targets})  # one order: no deadlock
    taken: list[tuple[Path, _Lock]] = []
    try:
        for key in keys:
            held = _take(key, wait_s, claim=False)
            taken.append((key, held))
            held.mutex.acquire()
        yield
    finally:
        for key, held in reversed(taken):
            held.mutex.release()
            with _GUARD:
                held.users -= 1
                held.claimed &= not written
                if not held.users and not held.claimed:
                    _let_go(key, held)


def release(*targets: str | os.PathLike[str] | None) -> None:
    """End this run's claims of ``targets`` that it has not written (it failed, or wrote
    nothing there); a lock a writer is using now is let go when that writer is done."""
    keys = {Path(os.path.abspath(t)) for t in targets if t is not None}
    with _GUARD:
        for key, held in list(_HELD.items()):
            if key in keys:
                held.claimed = False
                if not held.users:
                    _let_go(key, held)


def end_claims() -> None:
    """End all of this process's claims (the run is over: a command has returned or failed,
    or the process exits) and remove their lock files."""
    release(*_HELD)


def _forget_in_child() -> None:
    """After fork: the child is another run, holding none of its parent's locks."""
    global _GUARD
    _GUARD = threading.Lock()
    for held in _HELD.values():
        if held.fd >= 0:
            os.close(held.fd)  # the parent's own descriptor keeps its lock
    _HELD.clear()


atexit.register(end_claims)
os.register_at_fork(after_in_child=_forget_in_child)
