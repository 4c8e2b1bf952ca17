"""A full disk (or an exhausted quota) said as one line, wherever a write fails:

    no space left on /mnt/data writing /mnt/data/run/generations.sqlite; free space and rerun

The same failure reaches us in three forms: OSError with errno ENOSPC/EDQUOT (Python's own writes, a mkdir),
an OSError without errno whose text carries the C library's message (pyarrow), and SQLite's SQLITE_FULL
("database or disk is full"), which must never be read as a corrupt checkpoint: the file is healthy, and
moving it aside would throw away every committed sample. `writing(path)` wraps a write so that whichever
form arrives becomes DiskFullError naming the file; the CLI maps a stray one (no file known) the same way.
"""

from __future__ import annotations

import errno
import os
import sqlite3
from contextlib import contextmanager
from pathlib import Path

from kimi_eagle_data.errors import KimiDataError

_ERRNOS = (errno.ENOSPC, errno.EDQUOT)
_TEXTS = ("No space left on device", "Disk quota exceeded", "database or disk is full")
# SQLite reports a failed allocation of its WAL index (-shm, mmap'd pages) as an I/O error, not SQLITE_FULL:
# with the disk full that I/O error is the disk being full.
_SQLITE_IOERR = 10
_NEARLY_FULL = 1 << 20


class DiskFullError(KimiDataError):
    pass


def free_bytes(path: str | os.PathLike) -> int | None:
    p = Path(path)
    while not p.exists() and p != p.parent:
        p = p.parent
    try:
        st = os.statvfs(p)
    except OSError:
        return None
    return st.f_bavail * st.f_frsize


def is_disk_full(e: BaseException, path: str | os.PathLike | None = None) -> bool:
    if isinstance(e, DiskFullError):
        return True
    if isinstance(e, OSError) and e.errno in _ERRNOS:
        return True
    if isinstance(e, sqlite3.Error):
        code = getattr(e, "sqlite_errorcode", None)
        if code == sqlite3.SQLITE_FULL:
            return True
        if code is not None and code & 0xFF == _SQLITE_IOERR and path is not None:
            free = free_bytes(Path(path).parent)
            return free is not None and free < _NEARLY_FULL
    return isinstance(e, (OSError, sqlite3.Error)) and any(t in str(e) for t in _TEXTS)


def mount_point(path: str | os.PathLike) -> Path:
    p = Path(os.path.abspath(path))
    while not os.path.ismount(p) and p != p.parent:
        p = p.parent
    return p


def disk_full_line(path: str | os.PathLike | None) -> str:
    if path is None:
        return "no space left on the device being written; free space and rerun"
    return f"no space left on {mount_point(path)} writing {os.path.abspath(path)}; free space and rerun"


@contextmanager
def writing(path: str | os.PathLike):
    """Whatever form a full disk takes inside, it leaves as DiskFullError naming `path`."""
    try:
        yield
    except DiskFullError:
        raise
    except (OSError, sqlite3.Error) as e:
        if is_disk_full(e, path):
            raise DiskFullError(disk_full_line(path)) from None
        raise
