"""The storage layer: files the previous code wrote open and resume; records come back typed; a record and
its failure row change in one transaction.

The "previous code" fixtures are written with plain SQL: the schema and checksum exactly as the checkpoint
code before store/ wrote them (engines/checkpoint.py and score/scoring.py at commit 7275f5f), so the test
keeps meaning what it says even as store/ changes."""

from __future__ import annotations

import hashlib
import sqlite3

import numpy as np
import orjson
import pytest

from kimi_eagle_data.formats.kimi_k2.profiles import TINY_MODEL_DIR
from kimi_eagle_data.records import Completion, LogprobSums, PromptRecord, RequestFailure

# engines/checkpoint.py SCHEMA before store/ existed
PREVIOUS_CHECKPOINT_SCHEMA = """
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

# score/scoring.py SCHEMA before store/ existed
PREVIOUS_SCORE_SCHEMA = """
CREATE TABLE IF NOT EXISTS scores (
    id TEXT NOT NULL, kind TEXT NOT NULL, config TEXT NOT NULL,
    n INTEGER NOT NULL, sum REAL NOT NULL, top1 INTEGER NOT NULL,
    reasoning_n INTEGER NOT NULL, reasoning_sum REAL NOT NULL, reasoning_top1 INTEGER NOT NULL,
    clipped INTEGER NOT NULL, created_at REAL NOT NULL,
    PRIMARY KEY (id, kind)
);
CREATE TABLE IF NOT EXISTS failures (
    id TEXT NOT NULL, kind TEXT NOT NULL, config TEXT NOT NULL, reason TEXT NOT NULL, message TEXT NOT NULL,
    attempts INTEGER NOT NULL, updated_at REAL NOT NULL, PRIMARY KEY (id, kind)
);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""


def previous_checksum(id_: str, blob: bytes, finish_reason: str) -> str:
    """The checksum the previous checkpoint stored: blake2b-128 of `id NUL blob NUL finish_reason`."""
    return hashlib.blake2b(id_.encode() + b"\0" + blob + b"\0" + finish_reason.encode(), digest_size=16).hexdigest()


def write_previous_checkpoint(path, completed: dict[str, list[int]], failed: dict[str, tuple[str, str, int]]):
    db = sqlite3.connect(path)
    db.execute("PRAGMA journal_mode=WAL")
    db.executescript(PREVIOUS_CHECKPOINT_SCHEMA)
    for i, (id_, ids) in enumerate(completed.items()):
        blob = np.asarray(ids, dtype="<i4").tobytes()
        db.execute("INSERT INTO completions VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                   (id_, "B1", blob, "stop", orjson.dumps({"type": "stop", "matched": ids[-1]}).decode(),
                    7, len(ids), 2, "sglang", 0.5 + i, 100.0 + i, previous_checksum(id_, blob, "stop"),
                    orjson.dumps({"n": len(ids), "sum": -1.5, "top1": 1, "reasoning_n": 0, "reasoning_sum": 0.0,
                                  "reasoning_top1": 0}).decode()))
    for id_, (reason, message, attempts) in failed.items():
        db.execute("INSERT INTO failures VALUES (?,?,?,?,?,?)", (id_, "B1", reason, message, attempts, 50.0))
    db.execute("INSERT INTO meta VALUES (?, ?)", ("engine", orjson.dumps({"engine": "sglang"}).decode()))
    db.commit()
    db.close()


def columns(path, table: str) -> list[tuple]:
    """(name, type, notnull, pk) of each column of `table`, in order."""
    with sqlite3.connect(path) as db:
        return [(r[1], r[2], r[3], r[5]) for r in db.execute(f"PRAGMA table_info({table})")]


# -- the generation checkpoint ------------------------------------------------------------------------

def test_a_checkpoint_the_previous_code_wrote_reads_back_typed(tmp_path):
    from kimi_eagle_data.store.checkpoint import Checkpoint, RequestStat

    path = tmp_path / "generations.sqlite"
    write_previous_checkpoint(path, {"B1-a": [5, 6, 7], "B1-b": [8, 9]}, {"B1-c": ("http_500", "boom", 5)})
    ckpt = Checkpoint(path)
    try:
        assert ckpt.done_ids() == {"B1-a", "B1-b"}
        assert ckpt.failures() == {"B1-c": RequestFailure("B1-c", "http_500", "boom", 5)}
        assert ckpt.request_stats() == [RequestStat("B1-a", "B1", 7, 3, 2, 0.5, 100.0),
                                        RequestStat("B1-b", "B1", 7, 2, 2, 1.5, 101.0)]
        assert ckpt.get_meta("engine") == {"engine": "sglang"}
        a, b = ckpt.completions("B1")
        assert list(a.output_ids) == [5, 6, 7] and b.finish_detail == {"type": "stop", "matched": 9}
        assert a.logprob_stats["sum"] == -1.5
        [batch] = ckpt.batches("B1")
        batch.verify()      # the previous checksums verify
        assert batch.ids == ["B1-a", "B1-b"]
    finally:
        ckpt.close()


def test_a_previous_checkpoint_resumes_generation(tmp_path, tiny_tokenizer):
    """Done samples are not generated again, a failed one only with retry_failed; its failure row goes in the
    same transaction its completion lands."""
    from kimi_eagle_data.engines.base import SamplingParams
    from kimi_eagle_data.generate.records import generate_records
    from kimi_eagle_data.engines.local import LocalEngine
    from kimi_eagle_data.formats.kimi_k2.render import render_prompt
    from kimi_eagle_data.store.checkpoint import Checkpoint

    path = tmp_path / "generations.sqlite"
    write_previous_checkpoint(path, {"B1-a": [5, 6, 7]}, {"B1-c": ("connection", "refused", 5)})
    prompt = render_prompt(tiny_tokenizer, [{"role": "user", "content": "Say hi."}], None)
    records = [PromptRecord(i, "B1", "src", i, [], None, prompt) for i in ("B1-a", "B1-b", "B1-c")]
    sampling = SamplingParams(max_new_tokens=4, temperature=1.0, top_p=1.0, stop_token_ids=())
    engine = LocalEngine(str(TINY_MODEL_DIR), batch_size=2)
    ckpt = Checkpoint(path)
    try:
        first = generate_records(records, engine, ckpt, sampling)
        assert (first.requested, first.skipped_done, first.skipped_failed, first.completed) == (1, 1, 1, 1)
        assert ckpt.done_ids() == {"B1-a", "B1-b"} and set(ckpt.failures()) == {"B1-c"}
        second = generate_records(records, engine, ckpt, sampling, retry_failed=True)
        assert (second.requested, second.skipped_done, second.completed, second.failed) == (1, 2, 1, 0)
        assert ckpt.done_ids() == {"B1-a", "B1-b", "B1-c"} and ckpt.failures() == {}
        assert second.output_tokens == len(next(c for c in ckpt.completions("B1") if c.id == "B1-c").output_ids)
    finally:
        ckpt.close()
        engine.close()


def test_a_new_checkpoint_has_the_previous_schema_and_the_prompt_hash(tmp_path):
    """The previous columns, in order, then `prompt_hash`; a previous file opened for writing gets the same
    columns, its rows reading None there (stored before prompt hashes: kept as they are, store/prompt_view.py)."""
    from kimi_eagle_data.store.checkpoint import Checkpoint

    old, new = tmp_path / "old.sqlite", tmp_path / "new.sqlite"
    write_previous_checkpoint(old, {"B1-a": [5, 6]}, {})
    before = {t: columns(old, t) for t in ("completions", "failures", "meta")}
    Checkpoint(new).close()
    assert columns(new, "completions") == before["completions"] + [("spec_verify_ct", "INTEGER", 0, 0), ("prompt_hash", "TEXT", 0, 0)]
    for table in ("failures", "meta"):
        assert columns(new, table) == before[table], table
    ro = Checkpoint(old, readonly=True)      # read-only: not migrated, the hash reads None
    try:
        assert ro.completion_hashes("B1") == {"B1-a": None}
    finally:
        ro.close()
    ckpt = Checkpoint(old)
    try:
        assert ckpt.completion_hashes("B1") == {"B1-a": None}
        assert [c[0] for c in columns(old, "turns")][-2:] == ["origin", "effort"]
    finally:
        ckpt.close()
    for table in ("completions", "turns", "conversation_ends"):
        assert columns(old, table) == columns(new, table), table


def test_a_failed_transaction_leaves_the_failure_row(tmp_path):
    """The completion and the removal of its failure row are one transaction: a commit that fails midway
    changes neither."""
    from kimi_eagle_data.store.checkpoint import Checkpoint

    ckpt = Checkpoint(tmp_path / "generations.sqlite")
    try:
        ckpt.record_failure("B1", RequestFailure("B1-a", "abort", "client gone"))
        with pytest.raises(sqlite3.IntegrityError):
            with ckpt.transaction() as db:
                db.execute("DELETE FROM failures WHERE id='B1-a'")
                db.execute("INSERT INTO completions (id) VALUES ('B1-a')")   # NOT NULL columns: fails
        assert ckpt.failures() == {"B1-a": RequestFailure("B1-a", "abort", "client gone", 1)}
        ckpt.commit("B1", Completion("B1-a", [1, 2], "stop", {"type": "stop"}))
        assert ckpt.failures() == {} and ckpt.done_ids() == {"B1-a"}
    finally:
        ckpt.close()


# -- the score checkpoint -----------------------------------------------------------------------------

def test_a_score_checkpoint_the_previous_code_wrote_opens_and_resumes(tmp_path):
    from kimi_eagle_data.store.scores import Score, ScoreCheckpoint

    path = tmp_path / "score.sqlite"
    db = sqlite3.connect(path)
    db.executescript(PREVIOUS_SCORE_SCHEMA)
    db.execute("INSERT INTO scores VALUES (?,?,?,?,?,?,?,?,?,?,?)",
               ("B4-a", "upstream", "B4", 10, -20.5, 4, 3, -2.0, 1, 1, 100.0))
    db.execute("INSERT INTO failures VALUES (?,?,?,?,?,?,?)", ("B4-a", "own", "B4", "http_503", "busy", 5, 100.0))
    db.commit()
    db.close()

    ckpt = ScoreCheckpoint(path)
    try:
        assert ckpt.scores() == {("B4-a", "upstream"): Score(LogprobSums(10, -20.5, 4, 3, -2.0, 1), True)}
        assert ckpt.failures() == {("B4-a", "own"): RequestFailure("B4-a", "http_503", "busy", 5)}
        own = Score(LogprobSums.of([1, 2, 3], [-0.5, -1.0, -0.25], [1, 9, 3], 1), False)
        ckpt.commit("B4", ("B4-a", "own"), own)
        assert ckpt.failures() == {}
        assert ckpt.scores("B4")[("B4-a", "own")] == own
        assert own.sums.as_dict() == {"n": 3, "sum": -1.75, "top1": 2, "reasoning_n": 1, "reasoning_sum": -0.5,
                                      "reasoning_top1": 1}
    finally:
        ckpt.close()
    fresh = tmp_path / "fresh.sqlite"
    ScoreCheckpoint(fresh).close()
    for table in ("scores", "failures", "meta"):
        assert columns(fresh, table) == columns(path, table), table


def test_a_file_that_is_not_a_store_is_one_line(tmp_path):
    from kimi_eagle_data.store.scores import ScoreCheckpoint
    from kimi_eagle_data.store.sqlite import CorruptCheckpointError

    path = tmp_path / "score.sqlite"
    path.write_bytes(b"not a database at all, " * 100)
    with pytest.raises(CorruptCheckpointError, match=r"score checkpoint .*score\.sqlite is not a readable SQLite "
                                                     r"database .*rerun `kimi-data score`"):
        ScoreCheckpoint(path)


def test_a_checkpoint_is_never_seen_half_created(tmp_path):
    """Shards read each other's checkpoints while they start: a process creating checkpoints one after another
    and this one opening each read-only the moment it appears (the start-up race of a Slurm run). Every file
    opens as a checkpoint; none is "not a readable SQLite database"; no temporary file stays behind."""
    import subprocess
    import sys
    import time

    from kimi_eagle_data.store.checkpoint import Checkpoint

    files = 150
    writer = subprocess.Popen([sys.executable, "-c", (
        "import sys; from pathlib import Path; from kimi_eagle_data.store.checkpoint import Checkpoint\n"
        f"for i in range({files}):\n"
        f"    Checkpoint(Path(sys.argv[1]) / f'generations.shard-{{i}}-of-{files}.sqlite').close()\n"),
        str(tmp_path)])
    opened: set[str] = set()
    problems: list[str] = []
    deadline = time.monotonic() + 300
    while len(opened) < files and time.monotonic() < deadline:
        for path in tmp_path.glob("generations*.sqlite"):
            if path.name in opened:
                continue
            try:
                Checkpoint(path, readonly=True).close()
            except Exception as e:     # what a starting shard met: a file without its tables yet
                problems.append(f"{path.name}: {e}")
            opened.add(path.name)
        if writer.poll() not in (None, 0):
            break
    assert writer.wait(timeout=60) == 0
    assert not problems, problems[:3]
    assert len(opened) == files
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("generations")) == []
