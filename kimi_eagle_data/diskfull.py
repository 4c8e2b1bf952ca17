"""A full disk (or an exhausted quota) said as one line, wherever a write fails:

    no space left on /mnt/data writing /mnt/data/run/generations.sqlite; free space and rerun

The same failure reaches us in three forms: OSError with errno ENOSPC/EDQUOT (Python's own writes, a mkdir),
an OSError without errno whose text carries the C library's message (pyarrow), and SQLite's SQLITE_FULL
("database or disk is full"), which must never be read as a corrupt checkpoint: the file is healthy, and
moving it aside would throw away every committed sample. `writing(path)` wraps a write so that whichever
form arrives becomes DiskFullError naming the file; the CLI maps a stray one (no file known) the same way.

A file-size limit (`ulimit -f`, RLIMIT_FSIZE) is the other write that fails on a healthy file. Python ignores
SIGXFSZ, so the write fails with EFBIG: OSError errno EFBIG from Python's own writes, but SQLite reports it as a
plain "disk I/O error" (SQLITE_IOERR_WRITE; the errno is not exposed). The kernel writes up to the limit before
refusing, so a store's file that stands at the limit when SQLite's I/O error arrives is the limit's doing:
FileSizeLimitError, one line naming the limit and the file. Opening a store in WAL mode writes its index (the
-shm file) in 32 KiB regions, a reader's open too, whatever the store's own size: SQLite's SQLITE_IOERR_SHMSIZE
while the index's next region would cross the limit is the limit's doing as well.
"""

from __future__ import annotations

import errno
import os
import resource
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
_SQLITE_IOERR_SHMSIZE = _SQLITE_IOERR | (19 << 8)
_WAL_INDEX_REGION = 32 << 10


class DiskFullError(KimiDataError):
    pass


class FileSizeLimitError(KimiDataError):
    pass


def file_size_limit() -> int | None:
    """This process's limit on the size of a file it writes (RLIMIT_FSIZE, `ulimit -f`), in bytes; None: none."""
    soft, _ = resource.getrlimit(resource.RLIMIT_FSIZE)
    return None if soft == resource.RLIM_INFINITY else soft


def is_file_size_limit(e: BaseException, files: tuple[str | os.PathLike, ...] = ()) -> bool:
    """`e` is a write refused by the file-size limit: EFBIG under a limit, or SQLite's I/O error while one of
    the store's `files` (the database, its -wal or -journal) stands at the limit, or its failure to grow the
    WAL index (-shm) by a region the limit leaves no room for."""
    limit = file_size_limit()
    if limit is None:
        return False
    if isinstance(e, OSError) and (e.errno == errno.EFBIG or "File too large" in str(e)):
        return True
    code = (getattr(e, "sqlite_errorcode", None) or 0) if isinstance(e, sqlite3.Error) else 0
    if code & 0xFF != _SQLITE_IOERR:
        return False
    for f in files:
        try:
            size = os.stat(f).st_size
        except OSError:
            size = None
        if os.fspath(f).endswith("-shm"):
            # The index grows a region at a time (a missing one: from nothing): the next would cross the limit.
            if code == _SQLITE_IOERR_SHMSIZE and (size or 0) + _WAL_INDEX_REGION > limit:
                return True
        elif size is not None and size >= limit:
            return True
    return False


def file_size_limit_line(path: str | os.PathLike | None) -> str:
    limit = file_size_limit()
    where = f" writing {os.path.abspath(path)}" if path is not None else ""
    size = f" of {limit} bytes" if limit is not None else ""
    return (f"file-size limit{size} (ulimit -f) reached{where}; what was committed is kept: raise the limit "
            "(ulimit -f unlimited) and rerun")


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


def store_files(path: str | os.PathLike) -> tuple[str, ...]:
    """An SQLite file and the journals and WAL index SQLite writes beside it."""
    p = os.fspath(path)
    return p, p + "-wal", p + "-journal", p + "-shm"


@contextmanager
def writing(path: str | os.PathLike, *written: str | os.PathLike):
    """Whatever form a full disk takes inside, it leaves as DiskFullError naming `path`; a write past the file-size
    limit as FileSizeLimitError. `written`: the files the block writes when not `path` and its journals (a store
    made under a temporary name)."""
    try:
        yield
    except (DiskFullError, FileSizeLimitError):
        raise
    except (OSError, sqlite3.Error) as e:
        if is_file_size_limit(e, written or store_files(path)):
            raise FileSizeLimitError(file_size_limit_line(path)) from None
        if is_disk_full(e, path):
            raise DiskFullError(disk_full_line(path)) from None
        raise
