"""The generation checkpoint: completed samples committed atomically, keyed by id.

On the store layer (store/sqlite.py: WAL, one transaction per completion, a failures table), so a `kill -9`
at any moment leaves every committed sample intact and no torn record; the primary key makes a duplicate
impossible.
Every row carries a checksum of its token bytes, verified on read, so a corrupt checkpoint is
reported instead of being loaded silently.

Conversations regenerated on the model's own turns (policy own_history) keep two more tables, written in the
transaction of the completion they follow from: `turns`, the prompt of each later turn (turn k+1 holds turn k's
completion, so it exists only once that is stored), and `conversation_ends`, why a conversation has no next turn.
A rerun continues every conversation at its next turn: a turn is pending when its prompt is stored and its
completion is not.

`logprob_stats` (JSON, nullable) holds the per-sample sums of the target's log-probs of what it sampled
(`Completion.logprob_stats`), for `kimi-data score`. Checkpoints written before it existed get the column
on open (NULL: no log-probs recorded); the checksum covers only the token bytes, so they stay valid. So does
`spec_verify_ct` (the target's verify steps when the engine ran a drafter, SGLang's meta_info.spec_verify_ct).
"""

from __future__ import annotations

import hashlib
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator, NamedTuple

import numpy as np
import orjson

from kimi_eagle_data.records import Completion, ConversationEnd, PromptRecord, RequestFailure
from kimi_eagle_data.store.sqlite import CorruptCheckpointError, SQLiteStore

COMPLETIONS_TABLE = """
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
    logprob_stats TEXT,
    spec_verify_ct INTEGER
);
CREATE TABLE IF NOT EXISTS turns (
    id TEXT PRIMARY KEY,
    config TEXT NOT NULL,
    conversation_id TEXT NOT NULL,
    turn INTEGER NOT NULL,
    source TEXT NOT NULL,
    source_id TEXT NOT NULL,
    messages TEXT NOT NULL,
    tools TEXT NOT NULL,
    prompt_ids BLOB NOT NULL,
    answer TEXT NOT NULL,
    mode TEXT NOT NULL,
    temperature REAL,
    top_p REAL,
    checksum TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS conversation_ends (
    conversation_id TEXT PRIMARY KEY,
    config TEXT NOT NULL,
    turn INTEGER NOT NULL,
    reason TEXT NOT NULL,
    message TEXT NOT NULL
);"""

_TURN_COLUMNS = ("id", "config", "conversation_id", "turn", "source", "source_id", "messages", "tools", "prompt_ids",
                 "answer", "mode", "temperature", "top_p", "checksum")
_INSERT_TURN = f"INSERT OR IGNORE INTO turns ({', '.join(_TURN_COLUMNS)}) VALUES ({', '.join('?' * len(_TURN_COLUMNS))})"
_INSERT_END = ("INSERT OR IGNORE INTO conversation_ends (conversation_id, config, turn, reason, message) "
               "VALUES (?,?,?,?,?)")

_INSERT = ("INSERT OR IGNORE INTO completions (id, config, output_ids, finish_reason, finish_detail, prompt_tokens, "
           "completion_tokens, cached_tokens, engine, latency_s, created_at, checksum, logprob_stats, spec_verify_ct) "
           "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)")


@dataclass(frozen=True)
class RequestStat:
    """One completion's request counters, what stats and plan read (no token ids)."""

    id: str
    config: str
    prompt_tokens: int | None
    completion_tokens: int | None
    cached_tokens: int | None
    latency_s: float | None
    created_at: float
    spec_verify_ct: int | None = None      # target verify steps with a drafter (None: none, or not reported)


def _checksum(id_: str, blob: bytes | memoryview, finish_reason: str) -> str:
    """blake2b-128 of `id NUL blob NUL finish_reason`, fed in parts (no copy of the blob)."""
    h = hashlib.blake2b(id_.encode(), digest_size=16)
    h.update(b"\0")
    h.update(blob)
    h.update(b"\0")
    h.update(finish_reason.encode())
    return h.hexdigest()


def ids_to_blob(ids: Iterable[int]) -> bytes:
    return np.asarray(ids, dtype="<i4").tobytes()


class StoredRow(NamedTuple):
    """A stored completion as read back, tokens still bytes (a named tuple: built from the SQL row at no cost)."""

    id: str
    output_ids: bytes                 # little-endian int32
    finish_reason: str
    finish_detail: str                # JSON text
    checksum: str
    file: str                         # the checkpoint file it came from


def _corrupt_record(path: str | Path, id_: str) -> CorruptCheckpointError:
    return CorruptCheckpointError(
        f"checkpoint {path}: record {id_} fails its checksum; the file is corrupt. "
        "Delete that record (or the file) and rerun generate to regenerate it")


@dataclass
class CompletionBatch:
    """Consecutive completions (by id) in columns: the output ids of all of them in one contiguous int32
    buffer, row i at values[offsets[i]:offsets[i + 1]]. What validate reads; no per-row objects.

    Each row keeps its stored checksum and the file it came from: `verify()` checks them where the batch is
    consumed (validate's worker processes), so the reading process only reads."""

    ids: list[str]
    finish_reason: list[str]
    finish_detail: list[str]          # JSON text, as stored
    offsets: np.ndarray               # int64, len(ids) + 1
    values: np.ndarray                # int32
    checksums: list[str]
    files: list[str]                  # the checkpoint file of each row (for the error message)

    def __len__(self) -> int:
        return len(self.ids)

    @classmethod
    def from_rows(cls, rows: list[StoredRow]) -> "CompletionBatch":
        for r in rows:
            if not isinstance(r.output_ids, bytes) or len(r.output_ids) % 4:
                raise _corrupt_record(r.file, r.id)
        lengths = np.fromiter((len(r.output_ids) >> 2 for r in rows), dtype=np.int64, count=len(rows))
        offsets = np.zeros(len(rows) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        values = np.frombuffer(b"".join(r.output_ids for r in rows), dtype="<i4")
        return cls([r.id for r in rows], [r.finish_reason for r in rows], [r.finish_detail for r in rows], offsets,
                   values, [r.checksum for r in rows], [r.file for r in rows])

    def row(self, i: int) -> StoredRow:
        return StoredRow(self.ids[i], self.values[self.offsets[i]:self.offsets[i + 1]].tobytes(), self.finish_reason[i],
                self.finish_detail[i], self.checksums[i], self.files[i])

    def take(self, rows: list[int]) -> "CompletionBatch":
        return CompletionBatch.from_rows([self.row(i) for i in rows])

    def verify(self) -> None:
        """Raise CorruptCheckpointError for the first row whose ids or finish reason are not what was stored."""
        off = self.offsets.tolist()
        buf = memoryview(self.values).cast("B")
        for i, (id_, fr, checksum) in enumerate(zip(self.ids, self.finish_reason, self.checksums)):
            if _checksum(id_, buf[off[i] * 4:off[i + 1] * 4], fr) != checksum:
                raise _corrupt_record(self.files[i], id_)


class Checkpoint(SQLiteStore):
    """`generations*.sqlite`: one row per completed sample (the `completions` table), its failure row while it
    has none."""

    records_table = "completions"
    records_schema = COMPLETIONS_TABLE

    def migrate(self) -> None:
        if not self._has_column("completions", "logprob_stats"):   # a checkpoint from before log-probs were recorded
            self.db.execute("ALTER TABLE completions ADD COLUMN logprob_stats TEXT")
        if not self._has_column("completions", "spec_verify_ct"):   # from before drafters were recorded
            self.db.execute("ALTER TABLE completions ADD COLUMN spec_verify_ct INTEGER")

    def _has_column(self, table: str, column: str) -> bool:
        return any(r[1] == column for r in self.read(f"PRAGMA table_info({table})"))

    # -- writes -------------------------------------------------------------------------------
    def commit(self, config: str, c: Completion, follow: PromptRecord | ConversationEnd | None = None) -> None:
        """Store a completion (one transaction; a sample already stored stays as it is) and, for a conversation's
        turn, what follows from it in the same transaction: the next turn's prompt or the conversation's end."""
        blob = ids_to_blob(c.output_ids)
        row = (c.id, config, blob, c.finish_reason, orjson.dumps(c.finish_detail).decode(),
               c.prompt_tokens, c.completion_tokens, c.cached_tokens, c.engine, c.latency_s,
               time.time(), _checksum(c.id, blob, c.finish_reason),
               orjson.dumps(c.logprob_stats).decode() if c.logprob_stats is not None else None, c.spec_verify_ct)
        if follow is None:
            self.commit_record(_INSERT, row, (c.id,))
            return
        with self.transaction() as db:
            db.execute(_INSERT, row)
            db.execute(f"DELETE FROM failures WHERE {self._key_match()}", (c.id,))
            if isinstance(follow, ConversationEnd):
                db.execute(_INSERT_END, (follow.conversation_id, follow.config, follow.turn, follow.reason,
                                         follow.message))
            else:
                db.execute(_INSERT_TURN, _turn_row(follow))

    def record_failure(self, config: str, failure: RequestFailure) -> None:
        self.record_failure_row(config, (failure.id,), failure)

    # -- reads --------------------------------------------------------------------------------
    def done_ids(self, config: str | None = None) -> set[str]:
        q = "SELECT id FROM completions" + (" WHERE config=?" if config else "")
        return {r[0] for r in self.read(q, (config,) if config else ())}

    def failures(self, config: str | None = None) -> dict[str, RequestFailure]:
        return {key[0]: f for key, f in self.failure_rows(config)}

    def request_stats(self) -> list[RequestStat]:
        """Each completion's request counters, by id."""
        # A file from before drafters were recorded, opened read-only (so not migrated): none recorded.
        verify = "spec_verify_ct" if self._has_column("completions", "spec_verify_ct") else "NULL"
        return [RequestStat(*r) for r in self.read(
            f"SELECT id, config, prompt_tokens, completion_tokens, cached_tokens, latency_s, created_at, {verify} "
            "FROM completions ORDER BY id")]

    def finish_detail(self, id_: str) -> dict | None:
        r = self.read("SELECT finish_detail FROM completions WHERE id=?", (id_,))
        return orjson.loads(r[0][0]) if r else None

    def completions(self, config: str) -> Iterator[Completion]:
        try:
            yield from self._completions(config)
        except sqlite3.Error as e:   # e.g. a value that is no longer a blob, a damaged page
            raise self.unreadable(e) from e

    def _completions(self, config: str) -> Iterator[Completion]:
        # A file from before log-probs were recorded, opened read-only (so not migrated): none recorded.
        logprobs = "logprob_stats" if self._has_column("completions", "logprob_stats") else "NULL"
        cur = self.db.execute(
            "SELECT id, output_ids, finish_reason, finish_detail, prompt_tokens, completion_tokens, "
            f"cached_tokens, engine, latency_s, checksum, {logprobs} FROM completions WHERE config=? ORDER BY id",
            (config,))
        for (id_, blob, fr, fd, pt, ct, cached, engine, lat, checksum, lps) in cur:
            if not isinstance(blob, bytes) or _checksum(id_, blob, fr) != checksum or len(blob) % 4:
                raise _corrupt_record(self.path, id_)
            yield Completion(   # output_ids: a read-only int32 view of the stored bytes (no Python ints)
                id=id_, output_ids=np.frombuffer(blob, dtype="<i4"), finish_reason=fr,
                finish_detail=orjson.loads(fd), prompt_tokens=pt, completion_tokens=ct,
                cached_tokens=cached, engine=engine or "", latency_s=lat,
                logprob_stats=orjson.loads(lps) if lps else None)

    def batches(self, config: str, rows: int = 1024) -> Iterator[CompletionBatch]:
        """A config's completions by id in batches of `rows`: one query, fetched a batch at a time into one
        contiguous buffer. Checksums travel with the batch: the consumer runs `CompletionBatch.verify()`."""
        path = str(self.path)
        try:
            cur = self.db.execute("SELECT id, output_ids, finish_reason, finish_detail, checksum FROM completions "
                                  "WHERE config=? ORDER BY id", (config,))
            while chunk := cur.fetchmany(rows):
                yield CompletionBatch.from_rows([StoredRow(*r, path) for r in chunk])
        except sqlite3.Error as e:
            raise self.unreadable(e) from e

    def time_range(self) -> tuple[float, float] | None:
        row = self.read("SELECT MIN(created_at), MAX(created_at) FROM completions")[0]
        return None if row[0] is None else (row[0], row[1])

    # -- conversations ----------------------------------------------------------------------------
    def _has_turns(self) -> bool:
        """A file written before conversations has no turn tables (a read-only open does not add them)."""
        return bool(self.read("SELECT 1 FROM sqlite_master WHERE type='table' AND name='turns'"))

    def turn_ids(self, config: str | None = None, answered: bool = False) -> set[str]:
        """The ids of the later turns stored (of one config; `answered`: those the source answered too)."""
        if not self._has_turns():
            return set()
        where = [w for w, on in (("config=?", config), ("answer != ''", answered)) if on]
        q = "SELECT id FROM turns" + (f" WHERE {' AND '.join(where)}" if where else "")
        return {r[0] for r in self.read(q, (config,) if config else ())}

    def turn_conversations(self, config: str | None = None) -> dict[str, str]:
        """The later turns stored (of one config): id -> its conversation's id."""
        if not self._has_turns():
            return {}
        q = "SELECT id, conversation_id FROM turns" + (" WHERE config=?" if config else "")
        return dict(self.read(q, (config,) if config else ()))

    def turn_records(self, config: str | None = None, ids: Iterable[str] | None = None) -> list[PromptRecord]:
        """The stored later turns' prompts (of one config, or those of `ids`), by id; each verified."""
        if not self._has_turns():
            return []
        q = f"SELECT {', '.join(_TURN_COLUMNS)} FROM turns"
        if ids is not None:
            ids = list(ids)
            rows = [r for i in range(0, len(ids), 900) for r in self.read(
                q + f" WHERE id IN ({', '.join('?' * len(ids[i:i + 900]))})", tuple(ids[i:i + 900]))]
        else:
            rows = self.read(q + (" WHERE config=?" if config else ""), (config,) if config else ())
        return sorted((self._turn_record(r) for r in rows), key=lambda r: r.id)

    def _turn_record(self, r: tuple) -> PromptRecord:
        (id_, config, conv, turn, source, source_id, messages, tools, blob, answer, mode, temp, top_p, checksum) = r
        if not isinstance(blob, bytes) or len(blob) % 4 or _checksum(id_, blob, "turn") != checksum:
            raise _corrupt_record(self.path, id_)
        return PromptRecord(id_, config, source, source_id, orjson.loads(messages),
                            orjson.loads(tools) if tools else None, np.frombuffer(blob, dtype="<i4").tolist(),
                            orjson.loads(answer) if answer else None, mode=mode, temperature=temp, top_p=top_p,
                            conversation_id=conv, turn=turn)

    def conversation_ends(self, config: str | None = None) -> dict[str, ConversationEnd]:
        if not self._has_turns():
            return {}
        q = "SELECT conversation_id, config, turn, reason, message FROM conversation_ends"
        return {r[0]: ConversationEnd(*r) for r in self.read(q + (" WHERE config=?" if config else ""),
                                                             (config,) if config else ())}


def _turn_row(r: PromptRecord) -> tuple:
    blob = ids_to_blob(r.prompt_ids)
    return (r.id, r.config, r.conversation, r.turn, r.source, r.source_id, orjson.dumps(r.messages).decode(),
            orjson.dumps(r.tools).decode() if r.tools else "", blob,
            orjson.dumps(r.answer).decode() if r.answer else "", r.mode, r.temperature, r.top_p,
            _checksum(r.id, blob, "turn"))


def in_shard(id_: str, shard: tuple[int, int] | None) -> bool:
    """Deterministic split of sample ids into N disjoint shards (same answer on every machine)."""
    if shard is None:
        return True
    i, n = shard
    return int(hashlib.sha256(id_.encode()).hexdigest()[:12], 16) % n == i


class CheckpointSet:
    """Several checkpoint files (shards, merged workdirs) read as one."""

    def __init__(self, paths: Iterable[Path], readonly: bool = False):
        self.parts = [Checkpoint(p, readonly=readonly) for p in paths]
        self.duplicates = 0   # ids completed in more than one file (overlapping shards); the first wins

    def close(self) -> None:
        for p in self.parts:
            p.close()

    def done_ids(self) -> set[str]:
        return set().union(*(p.done_ids() for p in self.parts)) if self.parts else set()

    def failures(self, config: str | None = None) -> dict[str, RequestFailure]:
        merged: dict[str, RequestFailure] = {}
        for p in self.parts:
            merged.update(p.failures(config))
        return merged

    def batches(self, config: str, rows: int = 1024) -> Iterator[CompletionBatch]:
        """As Checkpoint.batches over every file; an id completed in several files counts once (the first)."""
        if len(self.parts) == 1:
            yield from self.parts[0].batches(config, rows)
            return
        import heapq

        def records(part):
            for b in part.batches(config, rows):
                for i in range(len(b)):
                    yield b.row(i)

        last, pending = None, []
        for r in heapq.merge(*(records(p) for p in self.parts), key=lambda r: r.id):
            if r.id == last:
                self.duplicates += 1
                continue
            last = r.id
            pending.append(r)
            if len(pending) == rows:
                yield CompletionBatch.from_rows(pending)
                pending = []
        if pending:
            yield CompletionBatch.from_rows(pending)

    def completions(self, config: str) -> Iterator[Completion]:
        """Whole completions of one config (score reads their log-prob sums); an id completed in several
        files counts once (the first)."""
        seen: set[str] = set()
        for p in self.parts:
            for c in p.completions(config):
                if c.id not in seen:
                    seen.add(c.id)
                    yield c

    def request_stats(self) -> list[RequestStat]:
        """As Checkpoint.request_stats over every file; a sample in two files counts once (the first)."""
        rows: dict[str, RequestStat] = {}
        for p in self.parts:
            for r in p.request_stats():
                rows.setdefault(r.id, r)
        return [rows[k] for k in sorted(rows)]

    def finish_detail(self, id_: str) -> dict | None:
        return next((d for d in (p.finish_detail(id_) for p in self.parts) if d is not None), None)

    def get_meta(self, key: str):
        for p in self.parts:
            v = p.get_meta(key)
            if v is not None:
                return v
        return None

    def time_range(self) -> tuple[float, float] | None:
        spans = [s for s in (p.time_range() for p in self.parts) if s]
        return (min(s[0] for s in spans), max(s[1] for s in spans)) if spans else None

    def turn_records(self, config: str | None = None, ids: Iterable[str] | None = None) -> list[PromptRecord]:
        """As Checkpoint.turn_records over every file; a turn stored in several files counts once."""
        found: dict[str, PromptRecord] = {}
        ids = None if ids is None else list(ids)
        for p in self.parts:
            for r in p.turn_records(config, ids):
                found.setdefault(r.id, r)
        return [found[k] for k in sorted(found)]

    def turn_ids(self, config: str | None = None, answered: bool = False) -> set[str]:
        return set().union(*(p.turn_ids(config, answered) for p in self.parts)) if self.parts else set()

    def turn_conversations(self, config: str | None = None) -> dict[str, str]:
        merged: dict[str, str] = {}
        for p in self.parts:
            merged.update(p.turn_conversations(config))
        return merged

    def conversation_ends(self, config: str | None = None) -> dict[str, ConversationEnd]:
        ends: dict[str, ConversationEnd] = {}
        for p in self.parts:
            for k, v in p.conversation_ends(config).items():
                ends.setdefault(k, v)
        return ends


def open_workdir_checkpoints(workdir, readonly: bool = True) -> CheckpointSet | None:
    """A workdir's checkpoint files (main and shards) read as one; None when generate never ran there."""
    paths = workdir.checkpoint_paths()
    return CheckpointSet(paths, readonly=readonly) if paths else None
