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
from typing import Callable, Iterable, Iterator, NamedTuple

import numpy as np
import orjson

from kimi_eagle_data.records import Completion, ConversationEnd, PromptRecord, RequestFailure
from kimi_eagle_data.store.prompt_hash import prompt_hash
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
    spec_verify_ct INTEGER,
    prompt_hash TEXT
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
    checksum TEXT NOT NULL,
    origin TEXT,
    effort TEXT
);
CREATE TABLE IF NOT EXISTS conversation_ends (
    conversation_id TEXT PRIMARY KEY,
    config TEXT NOT NULL,
    turn INTEGER NOT NULL,
    reason TEXT NOT NULL,
    message TEXT NOT NULL,
    origin TEXT
);"""

_TURN_COLUMNS = ("id", "config", "conversation_id", "turn", "source", "source_id", "messages", "tools", "prompt_ids",
                 "answer", "mode", "temperature", "top_p", "checksum")
_INSERT_TURN = (f"INSERT OR IGNORE INTO turns ({', '.join(_TURN_COLUMNS)}, origin, effort) "
                f"VALUES ({', '.join('?' * (len(_TURN_COLUMNS) + 2))})")
_INSERT_END = ("INSERT OR IGNORE INTO conversation_ends (conversation_id, config, turn, reason, message, origin) "
               "VALUES (?,?,?,?,?,?)")

_INSERT = ("INSERT OR IGNORE INTO completions (id, config, output_ids, finish_reason, finish_detail, prompt_tokens, "
           "completion_tokens, cached_tokens, engine, latency_s, created_at, checksum, logprob_stats, spec_verify_ct, "
           "prompt_hash) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)")

# Columns later versions added, per table, with their types: a writable open adds them to an older file (NULL
# in its rows); a read-only open reads NULL in their place (`_column`).
_ADDED_COLUMNS = {"completions": (("logprob_stats", "TEXT"), ("spec_verify_ct", "INTEGER"),
                                  ("prompt_hash", "TEXT")),
                  "turns": (("origin", "TEXT"), ("effort", "TEXT")), "conversation_ends": (("origin", "TEXT"),)}


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


class StoredTurn(NamedTuple):
    """A stored later turn without its prompt: what decides whether it belongs to today's selection."""

    id: str
    conversation: str
    turn: int
    origin: str | None                # None: stored before origins were (kept as it is)
    prompt_hash: str                  # of its stored prompt ids
    answered: bool                    # the source answered it too (`kimi-data score` scores that answer)


# keep(id, prompt_hash) -> bool: which stored completions a read takes (store/prompt_view.py)
KeepRow = Callable[[str, "str | None"], bool]


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
        # A checkpoint from before log-probs (logprob_stats), drafters (spec_verify_ct) or prompt hashes
        # (prompt_hash, origin) were recorded: NULL in its rows (store/prompt_view.py: a row without a hash
        # predates the check and is kept as it is).
        for table, columns in _ADDED_COLUMNS.items():
            for column, kind in columns:
                if not self._has_column(table, column):
                    self.db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {kind}")

    def _has_column(self, table: str, column: str) -> bool:
        return any(r[1] == column for r in self.read(f"PRAGMA table_info({table})"))

    def _column(self, table: str, column: str) -> str:
        """`column` in a SELECT, or NULL in a file (opened read-only) from before it existed."""
        return column if self._has_column(table, column) else "NULL"

    # -- writes -------------------------------------------------------------------------------
    def commit(self, config: str, c: Completion, follow: PromptRecord | ConversationEnd | None = None, *,
               prompt_hash: str | None = None, origin: str | None = None) -> None:
        """Store a completion (one transaction; a sample already stored stays as it is) with the hash of the
        prompt it answered (store/prompt_view.prompt_hash) and, for a conversation's turn, what follows from it in
        the same transaction: the next turn's prompt or the conversation's end, with `origin`, the hash of the
        conversation's first prompt and script it derives from (prompt_view.conversation_origin)."""
        blob = ids_to_blob(c.output_ids)
        row = (c.id, config, blob, c.finish_reason, orjson.dumps(c.finish_detail).decode(),
               c.prompt_tokens, c.completion_tokens, c.cached_tokens, c.engine, c.latency_s,
               time.time(), _checksum(c.id, blob, c.finish_reason),
               orjson.dumps(c.logprob_stats).decode() if c.logprob_stats is not None else None, c.spec_verify_ct,
               prompt_hash)
        if follow is None:
            self.commit_record(_INSERT, row, (c.id,))
            return
        with self.transaction() as db:
            db.execute(_INSERT, row)
            db.execute(f"DELETE FROM failures WHERE {self._key_match()}", (c.id,))
            self._insert_follow(db, follow, origin)

    def commit_follow(self, follow: PromptRecord | ConversationEnd, origin: str | None) -> None:
        """What follows a stored completion, stored on its own: a turn whose next turn was dropped because the
        source's script changed (generate continues the conversation again from there)."""
        with self.transaction() as db:
            self._insert_follow(db, follow, origin)

    @staticmethod
    def _insert_follow(db, follow: PromptRecord | ConversationEnd, origin: str | None) -> None:
        if isinstance(follow, ConversationEnd):
            db.execute(_INSERT_END, (follow.conversation_id, follow.config, follow.turn, follow.reason,
                                     follow.message, origin))
        else:
            db.execute(_INSERT_TURN, (*_turn_row(follow), origin, follow.effort))

    def forget(self, completions: Iterable[str] = (), turns: Iterable[str] = (),
               conversations: Iterable[str] = ()) -> None:
        """Delete, in one transaction, completions that answered an earlier version of their prompt, later turns
        derived from an earlier version of their conversation, and those conversations' stored ends: generate
        makes them again (store/prompt_view.py says which are stale)."""
        with self.transaction() as db:
            for table, key, ids in (("completions", "id", list(completions)), ("turns", "id", list(turns)),
                                    ("conversation_ends", "conversation_id", list(conversations))):
                if table != "completions" and not self._has_turns():
                    continue
                for i in range(0, len(ids), 900):
                    part = ids[i:i + 900]
                    db.execute(f"DELETE FROM {table} WHERE {key} IN ({', '.join('?' * len(part))})", tuple(part))

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
            yield from self._completions("config=?", (config,))
        except sqlite3.Error as e:   # e.g. a value that is no longer a blob, a damaged page
            raise self.unreadable(e) from e

    def completions_of(self, ids: Iterable[str]) -> dict[str, Completion]:
        """The stored completions of `ids` (those stored), by id."""
        ids = list(ids)
        out: dict[str, Completion] = {}
        try:
            for i in range(0, len(ids), 900):
                part = ids[i:i + 900]
                out.update((c.id, c) for c in self._completions(f"id IN ({', '.join('?' * len(part))})", tuple(part)))
        except sqlite3.Error as e:
            raise self.unreadable(e) from e
        return out

    def _completions(self, where: str, params: tuple) -> Iterator[Completion]:
        # A file from before log-probs were recorded, opened read-only (so not migrated): none recorded.
        logprobs = self._column("completions", "logprob_stats")
        cur = self.db.execute(
            "SELECT id, output_ids, finish_reason, finish_detail, prompt_tokens, completion_tokens, "
            f"cached_tokens, engine, latency_s, checksum, {logprobs} FROM completions WHERE {where} ORDER BY id",
            params)
        for (id_, blob, fr, fd, pt, ct, cached, engine, lat, checksum, lps) in cur:
            if not isinstance(blob, bytes) or _checksum(id_, blob, fr) != checksum or len(blob) % 4:
                raise _corrupt_record(self.path, id_)
            yield Completion(   # output_ids: a read-only int32 view of the stored bytes (no Python ints)
                id=id_, output_ids=np.frombuffer(blob, dtype="<i4"), finish_reason=fr,
                finish_detail=orjson.loads(fd), prompt_tokens=pt, completion_tokens=ct,
                cached_tokens=cached, engine=engine or "", latency_s=lat,
                logprob_stats=orjson.loads(lps) if lps else None)

    def completion_hashes(self, config: str | None = None) -> dict[str, str | None]:
        """Each stored completion's prompt hash (None: stored before prompt hashes were), by id."""
        q = f"SELECT id, {self._column('completions', 'prompt_hash')} FROM completions"
        return dict(self.read(q + (" WHERE config=?" if config else ""), (config,) if config else ()))

    def batches(self, config: str, rows: int = 1024, keep: KeepRow | None = None) -> Iterator[CompletionBatch]:
        """A config's completions by id in batches of `rows`: one query, fetched a batch at a time into one
        contiguous buffer. Checksums travel with the batch: the consumer runs `CompletionBatch.verify()`.
        `keep(id, prompt_hash)`: only the rows it keeps (store/prompt_view.py: those answering today's prompt)."""
        path = str(self.path)
        try:
            cur = self.db.execute("SELECT id, output_ids, finish_reason, finish_detail, checksum, "
                                  f"{self._column('completions', 'prompt_hash')} FROM completions "
                                  "WHERE config=? ORDER BY id", (config,))
            pending: list[StoredRow] = []
            while chunk := cur.fetchmany(rows):
                pending += [StoredRow(*r[:5], path) for r in chunk if keep is None or keep(r[0], r[5])]
                if len(pending) >= rows:
                    yield CompletionBatch.from_rows(pending[:rows])
                    pending = pending[rows:]
            if pending:
                yield CompletionBatch.from_rows(pending)
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

    def turn_index(self, config: str) -> list[StoredTurn]:
        """Every later turn stored of one config, without its prompt: what store/prompt_view.py sorts."""
        if not self._has_turns():
            return []
        rows = self.read(f"SELECT id, conversation_id, turn, {self._column('turns', 'origin')}, prompt_ids, "
                         "answer != '' FROM turns WHERE config=?", (config,))
        return [StoredTurn(i, conv, turn, origin, prompt_hash(blob) if isinstance(blob, bytes) else "", bool(answered))
                for i, conv, turn, origin, blob, answered in rows]

    def turn_records(self, config: str | None = None, ids: Iterable[str] | None = None,
                     origins: dict[str, str] | None = None) -> list[PromptRecord]:
        """The stored later turns' prompts (of one config, or those of `ids`), by id; each verified. With
        `origins` (conversation -> its origin now), only turns derived from that origin (or stored before
        origins were)."""
        if not self._has_turns():
            return []
        q = (f"SELECT {', '.join(_TURN_COLUMNS)}, {self._column('turns', 'effort')}, "
             f"{self._column('turns', 'origin')} FROM turns")
        if ids is not None:
            ids = list(ids)
            rows = [r for i in range(0, len(ids), 900) for r in self.read(
                q + f" WHERE id IN ({', '.join('?' * len(ids[i:i + 900]))})", tuple(ids[i:i + 900]))]
        else:
            rows = self.read(q + (" WHERE config=?" if config else ""), (config,) if config else ())
        if origins is not None:
            rows = [r for r in rows if r[-1] is None or origins.get(r[2]) == r[-1]]
        return sorted((self._turn_record(r[:-1]) for r in rows), key=lambda r: r.id)

    def _turn_record(self, r: tuple) -> PromptRecord:
        (id_, config, conv, turn, source, source_id, messages, tools, blob, answer, mode, temp, top_p, checksum,
         effort) = r
        if not isinstance(blob, bytes) or len(blob) % 4 or _checksum(id_, blob, "turn") != checksum:
            raise _corrupt_record(self.path, id_)
        return PromptRecord(id_, config, source, source_id, orjson.loads(messages),
                            orjson.loads(tools) if tools else None, np.frombuffer(blob, dtype="<i4").tolist(),
                            orjson.loads(answer) if answer else None, mode=mode, effort=effort, temperature=temp,
                            top_p=top_p, conversation_id=conv, turn=turn)

    def conversation_ends(self, config: str | None = None) -> dict[str, ConversationEnd]:
        return {e.conversation_id: e for e, _ in self.end_rows(config)}

    def end_rows(self, config: str | None = None) -> list[tuple[ConversationEnd, str | None]]:
        """Every stored conversation end (of one config) with its origin (None: stored before origins were)."""
        if not self._has_turns():
            return []
        q = (f"SELECT conversation_id, config, turn, reason, message, {self._column('conversation_ends', 'origin')} "
             "FROM conversation_ends")
        return [(ConversationEnd(*r[:5]), r[5]) for r in self.read(q + (" WHERE config=?" if config else ""),
                                                                   (config,) if config else ())]


def _turn_row(r: PromptRecord) -> tuple:
    blob = ids_to_blob(r.prompt_ids)
    return (r.id, r.config, r.conversation, r.turn, r.source, r.source_id, orjson.dumps(r.messages).decode(),
            orjson.dumps(r.tools).decode() if r.tools else "", blob,
            orjson.dumps(r.answer).decode() if r.answer else "", r.mode, r.temperature, r.top_p,
            _checksum(r.id, blob, "turn"))
