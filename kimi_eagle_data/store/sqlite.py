"""The one SQLite layer under the workdir's record stores (the generation checkpoint, the score checkpoint).

What every store gets from here, written once:

- WAL mode, `synchronous=NORMAL`: a committed transaction survives `kill -9`; a killed writer leaves no torn
  record (SQLite rolls an unfinished transaction back on the next open).
- A new file made whole under a temporary name and renamed into place: no reader (another shard starting) ever
  opens a file still being created, and a table-less file is never left behind.
- A `meta` table (key -> JSON value) and a `failures` table keyed like the store's records: a request the
  engine gave up on, with its reason, message and attempts (`RequestFailure`).
- One transaction per record (`commit_record`): the record lands and its failure row goes, or neither.
- Every write under `writing(path)`: a full disk is one line naming the file (DiskFullError), a write past the
  file-size limit (`ulimit -f`) one naming the limit (FileSizeLimitError), never a "corrupt" store. A file with
  no table in it (`holds_nothing`: nothing was ever committed to it) is a missing one. A file that is not a readable SQLite database is CorruptCheckpointError, one line saying
  what to do.
"""

from __future__ import annotations

import os
import sqlite3
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator
from urllib.parse import quote

import orjson

from kimi_eagle_data.diskfull import FileSizeLimitError, file_size_limit_line, is_file_size_limit, store_files, writing
from kimi_eagle_data.errors import KimiDataError
from kimi_eagle_data.records import RequestFailure

_UMASK = os.umask(0)
os.umask(_UMASK)
META_TABLE = "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);"


class CorruptCheckpointError(KimiDataError, RuntimeError):
    pass


def failures_table(key_columns: tuple[str, ...]) -> str:
    """The failures table of a store whose records are keyed by `key_columns` (the columns, in this order,
    of the files earlier versions wrote)."""
    if key_columns == ("id",):
        first = "id TEXT PRIMARY KEY, config TEXT NOT NULL"
        key = ""
    else:
        first = ", ".join(f"{c} TEXT NOT NULL" for c in key_columns) + ", config TEXT NOT NULL"
        key = f", PRIMARY KEY ({', '.join(key_columns)})"
    return (f"CREATE TABLE IF NOT EXISTS failures ({first}, reason TEXT NOT NULL, message TEXT NOT NULL, "
            f"attempts INTEGER NOT NULL, updated_at REAL NOT NULL{key});")


def open_store(path: Path, schema: str) -> sqlite3.Connection:
    """A writable SQLite file in WAL mode with `schema` in place. A new file is made whole beside its place (a
    hidden `.NAME.*.tmp` with the schema in it) and renamed into place: a reader never sees a file that is
    still being created (shards read each other's files while they start), and a failed creation leaves no
    file. A full disk raises DiskFullError (SQLite says "database or disk is full": not a corrupt file)."""
    if not path.exists() or holds_nothing(path):
        _create_store(path, schema)
    db = None
    try:
        with writing(path):
            db = sqlite3.connect(path, timeout=60, isolation_level=None)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            db.executescript(f"BEGIN IMMEDIATE;\n{schema}\nCOMMIT;")
        return db
    except BaseException:
        if db is not None:
            if db.in_transaction:
                db.rollback()
            db.close()
        raise


def _create_store(path: Path, schema: str) -> None:
    """`path` made whole under a temporary name, then renamed into place (open_store turns WAL mode on)."""
    tmp = None
    try:
        with writing(path):
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
            os.close(fd)
            tmp = Path(name)
        with writing(path, tmp):
            db = sqlite3.connect(tmp, timeout=60, isolation_level=None)
            # No journal: a file that fails to be made whole is deleted, never rolled back, so one would only cost
            # a page of a nearly full disk. And the failed write's file stays as it was: at the file-size limit
            # when that limit refused it (diskfull.is_file_size_limit reads it there).
            try:
                db.execute("PRAGMA journal_mode=OFF")
                db.executescript(f"BEGIN IMMEDIATE;\n{schema}\nCOMMIT;")
            finally:
                db.close()
            os.chmod(tmp, 0o666 & ~_UMASK)     # mkstemp makes 0600
            os.replace(tmp, path)           # over an empty file (holds_nothing) too
    finally:
        if tmp is not None:
            for leftover in (tmp, tmp.with_name(tmp.name + "-journal")):
                leftover.unlink(missing_ok=True)


def open_readonly(path: Path, what: str = "checkpoint") -> sqlite3.Connection:
    """`path` opened read-only (SQLite's `mode=ro`): nothing is written to it, no lock taken that a writer waits on,
    no schema created or changed. Reading a WAL database needs its `-shm` index; where that is missing and cannot
    be made (a read-only directory: another machine's workdir mounted read-only), a file with no write-ahead log
    to apply is opened as immutable, and one with a log is refused with what to do."""
    uri = f"file:{quote(str(path))}?mode=ro"
    try:
        return _connect_checked(uri)
    except sqlite3.OperationalError as e:
        if getattr(e, "sqlite_errorcode", None) != sqlite3.SQLITE_CANTOPEN or not path.is_file() \
                or os.access(path.parent, os.W_OK):
            raise
    wal = path.with_name(path.name + "-wal")
    if wal.exists() and wal.stat().st_size > 0:
        raise CorruptCheckpointError(
            f"{what} {path} cannot be read in place: its directory is read-only and its write-ahead log {wal} "
            "holds commits not yet in the file; copy the workdir somewhere writable and read the copy")
    return _connect_checked(uri + "&immutable=1")


def holds_nothing(path: Path) -> bool:
    """`path` is an SQLite database without a single table (a 0-byte file is one, also with its write-ahead log
    applied): no completion, failure or meta row was ever committed to it, so it is what a missing file is.

    Why a file may be so, though a new store appears whole (`_create_store`): a store made by an earlier version
    (which created the file in place), or one emptied by hand or by another tool. Refusing it as unreadable
    ("move it aside") would block every rerun for a file that holds nothing to lose; writers make it anew in its
    place (`_create_store`, the same atomic rename) and readers read it as empty (`SQLiteStore`). A file that
    cannot be read at all is not taken for empty: it may hold rows, and its error is said."""
    try:
        db = open_readonly(path)
    except (sqlite3.Error, CorruptCheckpointError):
        return False
    try:
        return db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] == 0
    except sqlite3.Error:
        return False
    finally:
        db.close()


def _connect_checked(uri: str) -> sqlite3.Connection:
    db = sqlite3.connect(uri, uri=True, timeout=60)
    try:
        db.execute("SELECT 1 FROM sqlite_master LIMIT 1")     # connect is lazy: open the file now
    except BaseException:
        db.close()
        raise
    return db


class SQLiteStore:
    """A record store in one SQLite file. A subclass names its records' table and schema, the columns that key
    a record (and its failure row), how its errors name the file and what a user does about a corrupt one."""

    records_table: str
    records_schema: str                 # CREATE TABLE IF NOT EXISTS <records_table> (...)
    key_columns: tuple[str, ...] = ("id",)
    what = "checkpoint"                 # how messages name the file
    remedy = "rerun generate, or restore it from a backup"

    def __init__(self, path: str | Path, readonly: bool = False):
        """`readonly`: for every reader (reports, and the stages reading checkpoints), which must never create,
        lock or alter a store (store/sqlite.open_readonly)."""
        self.path = Path(path)
        schema = "\n".join((self.records_schema, failures_table(self.key_columns), META_TABLE))
        try:
            if readonly:
                if holds_nothing(self.path):       # nothing committed: read as a store with no rows
                    self.db = sqlite3.connect(":memory:")
                    self.db.executescript(schema)
                    return
                self.db = open_readonly(self.path, self.what)
                # Not a store of this kind: fail here, not later.
                self.db.execute(f"SELECT 1 FROM {self.records_table} LIMIT 1")
                return
            self.db = open_store(self.path, schema)
            with writing(self.path):
                self.migrate()
        except sqlite3.DatabaseError as e:
            raise self.unopenable(e) from e

    def unopenable(self, e: sqlite3.DatabaseError) -> KimiDataError:
        """Only a file whose content is not a store is called unreadable and to be moved aside: it may hold
        committed rows, so an error of the file's surroundings (the file-size limit, an I/O error, a lock,
        permissions) says what it is and leaves the file where it is. A reader's open writes too (the WAL
        index), so the file-size limit is told here, not only under `writing`."""
        if is_file_size_limit(e, store_files(self.path)):
            return FileSizeLimitError(file_size_limit_line(self.path))
        code = (getattr(e, "sqlite_errorcode", None) or 0) & 0xFF
        if code in (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB) or "no such table" in str(e):
            return CorruptCheckpointError(f"{self.what} {self.path} is not a readable SQLite database ({e}); move "
                                          f"it aside and {self.remedy}")
        return CorruptCheckpointError(f"{self.what} {self.path} could not be opened ({e}); it was left as it is: "
                                      "check the disk and the file's permissions, then rerun")

    def migrate(self) -> None:
        """Bring a file an earlier version wrote up to this schema (on a writable open)."""

    def close(self) -> None:
        self.db.close()

    def unreadable(self, e: Exception) -> CorruptCheckpointError:
        return CorruptCheckpointError(f"{self.what} {self.path} cannot be read ({e}); the file is corrupt. Move it "
                                      f"aside and {self.remedy}")

    def read(self, sql: str, params: tuple = ()) -> list[tuple]:
        """All rows of a query; a damaged file is CorruptCheckpointError."""
        try:
            return self.db.execute(sql, params).fetchall()
        except sqlite3.DatabaseError as e:
            raise self.unreadable(e) from e

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction: committed whole when the block ends, rolled back when it raises."""
        with writing(self.path), self.db:
            self.db.execute("BEGIN IMMEDIATE")
            yield self.db

    def commit_record(self, insert: str, row: tuple, key: tuple[str, ...]) -> None:
        """Insert one record and drop its failure row, in one transaction."""
        with self.transaction() as db:
            db.execute(insert, row)
            db.execute(f"DELETE FROM failures WHERE {self._key_match()}", key)

    # -- failures -------------------------------------------------------------------------------
    def record_failure_row(self, config: str, key: tuple[str, ...], failure: RequestFailure) -> None:
        cols = (*self.key_columns, "config", "reason", "message", "attempts", "updated_at")
        with writing(self.path):
            self.db.execute(f"INSERT OR REPLACE INTO failures ({', '.join(cols)}) VALUES "
                            f"({', '.join('?' * len(cols))})",
                            (*key, config, failure.reason, failure.message, failure.attempts, time.time()))

    def failure_rows(self, config: str | None = None) -> Iterator[tuple[tuple[str, ...], RequestFailure]]:
        """(key, failure) of every recorded failure (of one config)."""
        n = len(self.key_columns)
        q = f"SELECT {', '.join(self.key_columns)}, reason, message, attempts FROM failures"
        for r in self.read(q + (" WHERE config=?" if config else ""), (config,) if config else ()):
            yield r[:n], RequestFailure(id=r[0], reason=r[n], message=r[n + 1], attempts=r[n + 2])

    def _key_match(self) -> str:
        return " AND ".join(f"{c}=?" for c in self.key_columns)

    # -- metadata -------------------------------------------------------------------------------
    def get_meta(self, key: str) -> Any:
        row = self.db.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return orjson.loads(row[0]) if row else None

    def set_meta(self, key: str, value: Any) -> None:
        with writing(self.path):
            self.db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, orjson.dumps(value).decode()))
