"""The score checkpoint, `<workdir>/score.sqlite`: one row per scored (sample id, kind), where kind is
`upstream` (the source's answer) or `own` (the target's completion); on the store layer (store/sqlite.py), so
each score is one transaction and a `kill -9` loses at most the one in flight. Failures are keyed the same way."""

from __future__ import annotations

import time
from dataclasses import dataclass

from kimi_eagle_data.records import LogprobSums, RequestFailure
from kimi_eagle_data.store.sqlite import SQLiteStore

SCORES_TABLE = """
CREATE TABLE IF NOT EXISTS scores (
    id TEXT NOT NULL, kind TEXT NOT NULL, config TEXT NOT NULL,
    n INTEGER NOT NULL, sum REAL NOT NULL, top1 INTEGER NOT NULL,
    reasoning_n INTEGER NOT NULL, reasoning_sum REAL NOT NULL, reasoning_top1 INTEGER NOT NULL,
    clipped INTEGER NOT NULL, created_at REAL NOT NULL,
    PRIMARY KEY (id, kind)
);"""

ScoreKey = tuple[str, str]          # (sample id, kind)


@dataclass(frozen=True)
class Score:
    """One stored score: its sums, and whether the scored tokens were clipped to fit `max_seq_len`."""

    sums: LogprobSums
    clipped: bool


class ScoreCheckpoint(SQLiteStore):
    records_table = "scores"
    records_schema = SCORES_TABLE
    key_columns = ("id", "kind")
    what = "score checkpoint"
    remedy = "rerun `kimi-data score`"

    def commit(self, config: str, key: ScoreKey, score: Score) -> None:
        s = score.sums
        self.commit_record("INSERT OR REPLACE INTO scores VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                           (*key, config, s.n, s.sum, s.top1, s.reasoning_n, s.reasoning_sum, s.reasoning_top1,
                            int(score.clipped), time.time()), key)

    def record_failure(self, config: str, key: ScoreKey, failure: RequestFailure) -> None:
        self.record_failure_row(config, key, failure)

    def scores(self, config: str | None = None) -> dict[ScoreKey, Score]:
        q = "SELECT id, kind, n, sum, top1, reasoning_n, reasoning_sum, reasoning_top1, clipped FROM scores"
        rows = self.read(q + (" WHERE config=?" if config else ""), (config,) if config else ())
        return {(r[0], r[1]): Score(LogprobSums(*r[2:8]), bool(r[8])) for r in rows}

    def failures(self, config: str | None = None) -> dict[ScoreKey, RequestFailure]:
        return {(key[0], key[1]): f for key, f in self.failure_rows(config)}
