"""`kimi-data score`: the target's log-probability of the upstream answers, per partition.

EAGLE-3 drafters learn to predict the target's own next tokens. Where a source's answers are already
text the target would likely write, training on them costs nothing; where the target finds them
unlikely, a drafter trained on them learns another model's style and accepts fewer tokens. The issue
that asked for this measured it: drafters trained on the tiny target's own completions reached an
acceptance length of 1.94 / 2.10 (two seeds), against 1.24 / 1.34 for drafters trained on answers in
another style (equal loss tokens); those answers scored -11.1 nats/token under the target, its own
completions -3.5. Where the upstream answers came from the target's own training distribution, both
scored alike and the drafters tied (2.10 vs 2.07).

For a seeded sample of each partition's prepared prompts (`--limit`, default 200; prompts that already
have an own completion first, so the two sets are the same prompts where possible) this stage renders
each upstream answer as the assistant turn the target would produce — the reasoning (when the source has
one), the profile's think_close, the answer (tool calls in the profile's tool-call tokens), end_of_turn —
and asks the engine for the log-prob of every answer token given the prompt, prefill only. The target's
own completions are scored by the sums `generate` recorded; a completion without them (an older
checkpoint, or sampling at a temperature other than 1, where the recorded log-probs are of the scaled
distribution) is scored prefill-only as well. An answer that does not fit `max_seq_len` is scored on the
prefix that fits (counted as `clipped`).

Checkpointed like generate: `<workdir>/score.sqlite`, one transaction per scored item, keyed by
(sample id, kind); a rerun scores only what is missing (kill -9 safe); failures are recorded with their
reason and skipped until `--retry-failed`. The report (score/report.py) lands in `<workdir>/score.json`,
which `plan` and the dataset card read.
"""

from __future__ import annotations

import hashlib
import sqlite3
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import orjson
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from kimi_eagle_data.diskfull import writing
from kimi_eagle_data.engines.checkpoint import CorruptCheckpointError, open_store
from kimi_eagle_data.engines.base import Engine, ScoreRequest
from kimi_eagle_data.grammar import reasoning_length
from kimi_eagle_data.profile import INSTANT, ProfileTokens
from kimi_eagle_data.prompts.answer import render_answer  # noqa: F401  (score renders upstream answers with it)
from kimi_eagle_data.records import PromptRecord

DEFAULT_LIMIT = 200
KINDS = ("upstream", "own")

SCHEMA = """
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
STAT_KEYS = ("n", "sum", "top1", "reasoning_n", "reasoning_sum", "reasoning_top1")


class ScoreCheckpoint:
    """`score.sqlite`: one row per scored (id, kind), committed whole (WAL, one transaction each)."""

    def __init__(self, path: Path):
        self.path = Path(path)
        try:
            self.db = open_store(self.path, SCHEMA)
        except sqlite3.DatabaseError as e:
            raise CorruptCheckpointError(f"score checkpoint {self.path} is not a readable SQLite database ({e}); "
                                         "move it aside and rerun `kimi-data score`") from e

    def close(self) -> None:
        self.db.close()

    def commit(self, config: str, id_: str, kind: str, stats: dict[str, Any], clipped: bool) -> None:
        with writing(self.path), self.db:
            self.db.execute("BEGIN IMMEDIATE")
            self.db.execute("INSERT OR REPLACE INTO scores VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                            (id_, kind, config, *(stats[k] for k in STAT_KEYS), int(clipped), time.time()))
            self.db.execute("DELETE FROM failures WHERE id=? AND kind=?", (id_, kind))

    def record_failure(self, config: str, id_: str, kind: str, error: dict[str, Any]) -> None:
        self.db.execute("INSERT OR REPLACE INTO failures VALUES (?,?,?,?,?,?,?)",
                        (id_, kind, config, str(error.get("reason", "error")), str(error.get("message", "")),
                         int(error.get("attempts", 1)), time.time()))

    def scores(self, config: str | None = None) -> dict[tuple[str, str], dict[str, Any]]:
        q = "SELECT id, kind, n, sum, top1, reasoning_n, reasoning_sum, reasoning_top1, clipped FROM scores"
        try:
            rows = self.db.execute(q + (" WHERE config=?" if config else ""), (config,) if config else ()).fetchall()
        except sqlite3.Error as e:
            raise CorruptCheckpointError(f"score checkpoint {self.path} cannot be read ({e}); move it aside and "
                                         "rerun `kimi-data score`") from e
        return {(r[0], r[1]): {**dict(zip(STAT_KEYS, r[2:8])), "clipped": bool(r[8])} for r in rows}

    def failures(self, config: str | None = None) -> dict[tuple[str, str], tuple[str, str]]:
        q = "SELECT id, kind, reason, message FROM failures" + (" WHERE config=?" if config else "")
        return {(r[0], r[1]): (r[2], r[3]) for r in self.db.execute(q, (config,) if config else ())}

    def get_meta(self, key: str):
        row = self.db.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return orjson.loads(row[0]) if row else None

    def set_meta(self, key: str, value) -> None:
        self.db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, orjson.dumps(value).decode()))


def stats_of(logprobs: list[float], top1_ids: list[int], ids: list[int], reasoning_n: int) -> dict[str, Any]:
    hits = [int(a == b) for a, b in zip(ids, top1_ids)]
    k = min(reasoning_n, len(ids))
    return {"n": len(ids), "sum": float(sum(logprobs)), "top1": sum(hits),
            "reasoning_n": k, "reasoning_sum": float(sum(logprobs[:k])), "reasoning_top1": sum(hits[:k])}


# -- the sample and the work list ---------------------------------------------------------------------

def rank(seed: int, id_: str) -> str:
    return hashlib.sha256(f"{seed}\x1f{id_}".encode()).hexdigest()


def sample(records: list[PromptRecord], generated: set[str], limit: int, seed: int) -> list[PromptRecord]:
    """Up to `limit` prompts with an upstream answer, in seeded order, those with an own completion first."""
    with_answer = [r for r in records if r.answer]
    return sorted(with_answer, key=lambda r: (r.id not in generated, rank(seed, r.id)))[:limit]


@dataclass
class Item:
    config: str
    id: str
    kind: str
    request: ScoreRequest
    reasoning_n: int
    clipped: bool


@dataclass
class ScoreRun:
    scored: int = 0
    failed: int = 0
    skipped_done: int = 0
    skipped_failed: int = 0
    tokens: int = 0
    seconds: float = 0.0
    reasons: Counter = field(default_factory=Counter)


def plan_items(config: str, picked: list[PromptRecord], own: dict[str, Any], tokenizer, tokens: ProfileTokens,
               max_len: int, rescore_own: bool) -> Iterator[Item]:
    """What to ask the engine: every sampled upstream answer, and the own completions that have no
    recorded sums (or all of them with `rescore_own`, and those of prompts sampled at a temperature other
    than 1, whose recorded log-probs are of the scaled distribution). `own`: id -> Completion from the
    generation checkpoint. An instant-mode prompt's answers have no reasoning (render_answer, reasoning_length)."""
    for r in picked:
        if len(r.prompt_ids) >= max_len:       # nothing of the answer would fit (prepare keeps room; be safe)
            continue
        instant = r.mode == INSTANT
        ids, k = render_answer(r.answer, tokenizer, tokens, instant)
        full = list(r.prompt_ids) + ids
        yield Item(config, r.id, "upstream", ScoreRequest(f"{r.id}:upstream", full[:max_len], len(r.prompt_ids)),
                   k, len(full) > max_len)
        c = own.get(r.id)
        own_scaled = r.temperature is not None and float(r.temperature) != 1.0
        if c is not None and len(c.output_ids) and (rescore_own or own_scaled or c.logprob_stats is None):
            out = [int(t) for t in c.output_ids]
            full = list(r.prompt_ids) + out
            yield Item(config, r.id, "own", ScoreRequest(f"{r.id}:own", full[:max_len], len(r.prompt_ids)),
                       reasoning_length(out, tokens, instant), len(full) > max_len)


def run_scoring(items: list[Item], engine: Engine, ckpt: ScoreCheckpoint, *, retry_failed: bool,
                console: Console | None = None, show_progress: bool = True) -> ScoreRun:
    """Score every item not yet in the checkpoint; commit each result as it comes back."""
    run = ScoreRun()
    done, failed = set(ckpt.scores()), set(ckpt.failures())
    todo: dict[str, Item] = {}
    for it in items:
        key = (it.id, it.kind)
        if key in done:
            run.skipped_done += 1
        elif key in failed and not retry_failed:
            run.skipped_failed += 1
        else:
            todo[it.request.id] = it
    if not todo:
        return run
    progress = Progress(TextColumn("[bold]score"), BarColumn(), MofNCompleteColumn(),
                        TextColumn("{task.fields[tps]:>7.0f} tok/s"), TextColumn("{task.fields[note]}"),
                        TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
                        console=console or Console(stderr=True), disable=not show_progress)
    t0 = time.perf_counter()
    with progress:
        task = progress.add_task("score", total=len(todo), tps=0.0, note="")
        for res in engine.score([it.request for it in todo.values()]):
            it = todo[res.id]
            if res.error is None and len(res.logprobs) == len(it.request.input_ids) - it.request.start:
                answer_ids = it.request.input_ids[it.request.start:]
                ckpt.commit(it.config, it.id, it.kind, stats_of(res.logprobs, res.top1_ids, answer_ids, it.reasoning_n),
                            it.clipped)
                run.scored += 1
                run.tokens += len(answer_ids)
            else:
                err = res.error or {"reason": "bad_response", "message": "log-probs do not cover the answer"}
                ckpt.record_failure(it.config, it.id, it.kind, err)
                run.failed += 1
                run.reasons[str(err.get("reason"))] += 1
            elapsed = time.perf_counter() - t0
            progress.update(task, advance=1, tps=run.tokens / elapsed if elapsed else 0.0,
                            note=" ".join(f"{k}={v}" for k, v in sorted(run.reasons.items())))
    run.seconds = time.perf_counter() - t0
    return run
