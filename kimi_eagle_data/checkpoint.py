"""The generation checkpoint: completed samples committed atomically, keyed by id.

SQLite in WAL mode: each completion is one transaction, so a `kill -9` at any moment leaves
every committed sample intact and no torn record; the primary key makes a duplicate impossible.
Every row carries a checksum of its token bytes, verified on read, so a corrupt checkpoint is
reported instead of being loaded silently.

`logprob_stats` (JSON, nullable) holds the per-sample sums of the target's log-probs of what it sampled
(`Completion.logprob_stats`), for `kimi-data score`. Checkpoints written before it existed get the column
on open (NULL: no log-probs recorded); the checksum covers only the token bytes, so they stay valid.
"""

from __future__ import annotations

import hashlib
import sqlite3
import time
from pathlib import Path
from typing import Iterable, Iterator

import numpy as np
import orjson

from .records import Completion

SCHEMA = """
CREATE TABLE IF NOT EXISTS completions (
    id TEXT PRIMARY KEY,
    config TEXT NOT NULL,
    output_ids BLOB NOT NULL,
    finish_reason TEXT NOT NULL,
    finish_detail TEXT NOT NULL,
    prompt_tokens INTEGER,
    completion_tokens INTEGER,
    cached_tokens INTEGER,
    engine TEXT,
    latency_s REAL,
    created_at REAL NOT NULL,
    checksum TEXT NOT NULL,
    logprob_stats TEXT
);
CREATE TABLE IF NOT EXISTS failures (
    id TEXT PRIMARY KEY,
    config TEXT NOT NULL,
    reason TEXT NOT NULL,
    message TEXT NOT NULL,
    attempts INTEGER NOT NULL,
    updated_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""


class CorruptCheckpointError(RuntimeError):
    pass


def _checksum(id_: str, blob: bytes, finish_reason: str) -> str:
    return hashlib.blake2b(id_.encode() + b"\0" + blob + b"\0" + finish_reason.encode(), digest_size=16).hexdigest()


def ids_to_blob(ids: Iterable[int]) -> bytes:
    return np.asarray(ids, dtype="<i4").tobytes()


class Checkpoint:
    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self.db = sqlite3.connect(self.path, timeout=60, isolation_level=None)
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=NORMAL")
            self.db.executescript(SCHEMA)
            self._migrate()
        except sqlite3.DatabaseError as e:
            raise CorruptCheckpointError(
                f"checkpoint {self.path} is not a readable SQLite database ({e}); move it aside and rerun "
                "generate, or restore it from a backup") from e

    def _migrate(self) -> None:
        cols = {r[1] for r in self.db.execute("PRAGMA table_info(completions)")}
        if "logprob_stats" not in cols:   # a checkpoint from before log-probs were recorded
            self.db.execute("ALTER TABLE completions ADD COLUMN logprob_stats TEXT")

    def close(self) -> None:
        self.db.close()

    # -- metadata -----------------------------------------------------------------------------
    def get_meta(self, key: str):
        row = self.db.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return orjson.loads(row[0]) if row else None

    def set_meta(self, key: str, value) -> None:
        self.db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, orjson.dumps(value).decode()))

    # -- writes -------------------------------------------------------------------------------
    def commit(self, config: str, c: Completion) -> None:
        blob = ids_to_blob(c.output_ids)
        with self.db:  # one transaction: the completion lands and its failure record goes, or neither
            self.db.execute("BEGIN IMMEDIATE")
            self.db.execute(
                "INSERT OR IGNORE INTO completions (id, config, output_ids, finish_reason, finish_detail, "
                "prompt_tokens, completion_tokens, cached_tokens, engine, latency_s, created_at, checksum, "
                "logprob_stats) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (c.id, config, blob, c.finish_reason, orjson.dumps(c.finish_detail).decode(),
                 c.prompt_tokens, c.completion_tokens, c.cached_tokens, c.engine, c.latency_s,
                 time.time(), _checksum(c.id, blob, c.finish_reason),
                 orjson.dumps(c.logprob_stats).decode() if c.logprob_stats is not None else None),
            )
            self.db.execute("DELETE FROM failures WHERE id=?", (c.id,))

    def record_failure(self, config: str, id_: str, reason: str, message: str, attempts: int) -> None:
        self.db.execute("INSERT OR REPLACE INTO failures VALUES (?,?,?,?,?,?)",
                        (id_, config, reason, message, attempts, time.time()))

    def clear_failures(self, config: str | None = None) -> int:
        q = "DELETE FROM failures" + (" WHERE config=?" if config else "")
        return self.db.execute(q, (config,) if config else ()).rowcount

    # -- reads --------------------------------------------------------------------------------
    def done_ids(self, config: str | None = None) -> set[str]:
        q = "SELECT id FROM completions" + (" WHERE config=?" if config else "")
        return {r[0] for r in self.db.execute(q, (config,) if config else ())}

    def failures(self, config: str | None = None) -> dict[str, tuple[str, str, int]]:
        q = "SELECT id, reason, message, attempts FROM failures" + (" WHERE config=?" if config else "")
        return {r[0]: (r[1], r[2], r[3]) for r in self.db.execute(q, (config,) if config else ())}

    def completions(self, config: str) -> Iterator[Completion]:
        try:
            yield from self._completions(config)
        except sqlite3.Error as e:   # e.g. a value that is no longer a blob, a damaged page
            raise CorruptCheckpointError(
                f"checkpoint {self.path} cannot be read ({e}); the file is corrupt. Move it aside and rerun "
                "generate, or restore it from a backup") from e

    def _completions(self, config: str) -> Iterator[Completion]:
        cur = self.db.execute(
            "SELECT id, output_ids, finish_reason, finish_detail, prompt_tokens, completion_tokens, "
            "cached_tokens, engine, latency_s, checksum, logprob_stats FROM completions WHERE config=? ORDER BY id",
            (config,))
        for (id_, blob, fr, fd, pt, ct, cached, engine, lat, checksum, lps) in cur:
            if not isinstance(blob, bytes) or _checksum(id_, blob, fr) != checksum or len(blob) % 4:
                raise CorruptCheckpointError(
                    f"checkpoint {self.path}: record {id_} fails its checksum; the file is corrupt. "
                    "Delete that record (or the file) and rerun generate to regenerate it")
            yield Completion(   # output_ids: a read-only int32 view of the stored bytes (no Python ints)
                id=id_, output_ids=np.frombuffer(blob, dtype="<i4"), finish_reason=fr,
                finish_detail=orjson.loads(fd), prompt_tokens=pt, completion_tokens=ct,
                cached_tokens=cached, engine=engine or "", latency_s=lat,
                logprob_stats=orjson.loads(lps) if lps else None)

    def time_range(self) -> tuple[float, float] | None:
        row = self.db.execute("SELECT MIN(created_at), MAX(created_at) FROM completions").fetchone()
        return None if row[0] is None else (row[0], row[1])


def shard_checkpoint_name(shard: tuple[int, int] | None) -> str:
    """One checkpoint file per shard, so nodes sharing one workdir never write the same SQLite file."""
    return "generations.sqlite" if shard is None else f"generations.shard-{shard[0]}-of-{shard[1]}.sqlite"


def in_shard(id_: str, shard: tuple[int, int] | None) -> bool:
    """Deterministic split of sample ids into N disjoint shards (same answer on every machine)."""
    if shard is None:
        return True
    i, n = shard
    return int(hashlib.sha256(id_.encode()).hexdigest()[:12], 16) % n == i


class CheckpointSet:
    """Several checkpoint files (shards, merged workdirs) read as one."""

    def __init__(self, paths: Iterable[Path]):
        self.parts = [Checkpoint(p) for p in paths]
        self.duplicates = 0   # ids completed in more than one file (overlapping shards); the first wins

    def close(self) -> None:
        for p in self.parts:
            p.close()

    def done_ids(self) -> set[str]:
        return set().union(*(p.done_ids() for p in self.parts)) if self.parts else set()

    def failures(self, config: str | None = None) -> dict[str, tuple[str, str, int]]:
        merged: dict[str, tuple[str, str, int]] = {}
        for p in self.parts:
            merged.update(p.failures(config))
        return merged

    def completions(self, config: str) -> Iterator[Completion]:
        import heapq

        last = None
        for c in heapq.merge(*(p.completions(config) for p in self.parts), key=lambda c: c.id):
            if c.id == last:
                self.duplicates += 1
                continue
            last = c.id
            yield c

    def get_meta(self, key: str):
        for p in self.parts:
            v = p.get_meta(key)
            if v is not None:
                return v
        return None

    def time_range(self) -> tuple[float, float] | None:
        spans = [s for s in (p.time_range() for p in self.parts) if s]
        return (min(s[0] for s in spans), max(s[1] for s in spans)) if spans else None
