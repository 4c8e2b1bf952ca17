"""One writer per workdir: an exclusive `flock` on `<workdir>/.lock`, held while a command that writes the workdir
runs (prepare, generate, validate, emit, build, demo, score; everything that opens a run, runs.open_run).

The kernel drops a flock when the last descriptor of its open file closes, so a process that dies in any way,
`kill -9` included, leaves the workdir unlocked: no stale lock file to delete by hand. Forked children (the
verdict pool) close their copy at fork, so they never keep a dead parent's workdir locked. Readers (stats,
inspect, plan, check, export) take no lock and keep working during a run.

`generate --shard i/N` on a workdir shared by several nodes takes the workdir lock shared and its own
`.lock.shard-i-of-N` exclusively: the shards run side by side (each writes its own checkpoint file), the same
shard twice, or a build during them, is refused.

The lock file holds the holder's pid, host and command, for the message the refused process prints.
"""

from __future__ import annotations

import fcntl
import os
import socket
import sys
import weakref
from pathlib import Path

import orjson

from kimi_eagle_data.errors import KimiDataError


class WorkdirBusyError(KimiDataError, RuntimeError):
    pass


# Locks this process holds, by (lock file, mode): a second run on the same workdir in one process shares
# the lock instead of refusing itself (flock conflicts between two open files of one process too).
_HELD: "weakref.WeakValueDictionary[tuple[str, int], _FileLock]" = weakref.WeakValueDictionary()


class _FileLock:
    def __init__(self, path: Path, mode: int):
        self.path = path
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(self.fd, mode | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self.fd)
            self.fd = -1
            raise
        if mode == fcntl.LOCK_EX:   # shared holders (shards) leave their note in their own shard's file
            self._note()

    def _note(self) -> None:
        """Who holds it, for the message of a refused process (best effort: on a full disk the lock still holds)."""
        name = Path(sys.argv[0]).name if sys.argv and sys.argv[0] else "python"
        command = " ".join(["kimi-data" if name in ("__main__.py", "kimi-data") else name, *sys.argv[1:2]])
        note = orjson.dumps({"pid": os.getpid(), "host": socket.gethostname(), "command": command})
        try:
            os.ftruncate(self.fd, 0)
            os.pwrite(self.fd, note + b"\n", 0)
        except OSError:
            pass

    def release(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)   # closing the last descriptor releases the flock
            self.fd = -1

    def forget_in_child(self) -> None:
        """In a forked child: close the inherited descriptor (the parent's lock stays: it has its own)."""
        self.release()

    def __del__(self):
        self.release()


def _after_fork_in_child() -> None:
    for lock in list(_HELD.values()):
        lock.forget_in_child()
    _HELD.clear()


os.register_at_fork(after_in_child=_after_fork_in_child)


class WorkdirLock:
    """The locks one command holds on one workdir; released by `release()`, when collected, or at exit."""

    def __init__(self, root: Path, shard: tuple[int, int] | None = None):
        self.root = root
        self._locks: list[_FileLock] = []
        try:
            if shard is None:
                self._take(root / ".lock", fcntl.LOCK_EX)
            else:
                self._take(root / ".lock", fcntl.LOCK_SH)
                self._take(root / f".lock.shard-{shard[0]}-of-{shard[1]}", fcntl.LOCK_EX)
        except BaseException:
            self.release()
            raise

    def _take(self, path: Path, mode: int) -> None:
        key = (str(path), mode)
        lock = _HELD.get(key)
        if lock is None:
            try:
                lock = _FileLock(path, mode)
            except BlockingIOError:
                raise WorkdirBusyError(busy_message(self.root, path)) from None
            _HELD[key] = lock
        self._locks.append(lock)

    def release(self) -> None:
        self._locks.clear()   # a lock no other WorkdirLock of this process shares is closed as it is collected


def busy_message(root: Path, lock_path: Path) -> str:
    holders = [_holder(p) for p in sorted(root.glob(".lock.shard-*")) if p != lock_path and _is_locked(p)]
    holder = ", ".join(holders) if holders else _holder(lock_path)
    return (f"{root} is in use by {holder}, which writes it; wait for it to finish (or stop it), or use another "
            "--workdir")


def workdir_writer(root: Path) -> str | None:
    """Who writes the workdir now (`kimi-data generate` (pid 123)), or None when no command holds it. For a
    reader's message; it takes no lock."""
    shards = [_holder(p) for p in sorted(root.glob(".lock.shard-*")) if _is_locked(p)]
    if shards:
        return ", ".join(shards)
    lock = root / ".lock"
    return _holder(lock) if _is_locked(lock) else None


def _is_locked(path: Path) -> bool:
    """Whether some process holds `path` (a shard's lock) now."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


def _holder(lock_path: Path) -> str:
    try:
        note = orjson.loads(lock_path.read_bytes())
        where = "" if note.get("host") == socket.gethostname() else f" on {note.get('host')}"
        return f"`{note['command']}` (pid {note['pid']}{where})"
    except (OSError, ValueError, KeyError, TypeError, AttributeError):   # a note being written at this instant
        return "another kimi-data process"
