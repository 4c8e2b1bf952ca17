"""What a config's rows say about its conversations: how many, how many turns each, why they ended, and the
lengths per turn index. Read from the light columns (`conversation_id`, `turn`, `end_reason`) by `kimi-data
stats` and the dataset card.

A conversation's rows are its generated turns (a turn still pending or failed has no row yet); a prompt of
another policy is turn 1 of a conversation of its own, with no end reason. A config "has conversations" when a
row is a later turn or names an end reason: an own_history config whose every conversation ended at turn 1
still says why each ended.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

TURN_COLUMNS = ["conversation_id", "turn", "end_reason"]


def read_turn_columns(path: Path) -> pa.Table | None:
    """A validated/<CFG>.parquet's (or shard's) conversation columns; None for a file written before turns."""
    if not set(TURN_COLUMNS) <= set(pq.read_schema(path).names):
        return None
    return pq.read_table(path, columns=TURN_COLUMNS)


def config_shape(path: Path) -> dict[str, Any] | None:
    """conversation_shape of a validated/<CFG>.parquet's rows; None for a file written before turns."""
    t = read_turn_columns(path)
    return None if t is None else conversation_shape(*turn_arrays(t))


def turn_arrays(t: pa.Table) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(conversation_id, turn, end_reason) of a table with TURN_COLUMNS, as numpy arrays (None: no end reason)."""
    turn = t["turn"].to_numpy().astype(np.int64) if t.num_rows else np.zeros(0, dtype=np.int64)
    return (np.array(t["conversation_id"].to_pylist(), dtype=object), turn,
            np.array(t["end_reason"].to_pylist(), dtype=object))


def has_conversations(turn: np.ndarray, end_reason: np.ndarray) -> bool:
    return bool((turn > 1).any()) or any(r is not None for r in end_reason)


def turns_per_conversation(conversation_id: np.ndarray) -> np.ndarray:
    """Rows per conversation (one row per generated turn), in no particular order."""
    if not len(conversation_id):
        return np.zeros(0, dtype=np.int64)
    _, counts = np.unique(np.asarray(conversation_id, dtype=str), return_counts=True)
    return counts.astype(np.int64)


def conversation_shape(conversation_id: np.ndarray, turn: np.ndarray, end_reason: np.ndarray) -> dict[str, Any]:
    """{conversations, rows, turns_per_conversation {mean, max, histogram {"1".."max": conversations}},
    end_reasons {reason: conversations}} over a config's rows (every split)."""
    per = turns_per_conversation(conversation_id)
    top = int(per.max()) if per.size else 0
    hist = np.bincount(per, minlength=top + 1)[1:] if per.size else np.zeros(0, dtype=np.int64)
    ends: dict[str, int] = {}
    for r in end_reason:
        if r is not None:
            ends[r] = ends.get(r, 0) + 1
    return {"conversations": int(per.size), "rows": int(len(turn)),
            "turns_per_conversation": {"mean": round(float(per.mean()), 3) if per.size else None,
                                       "max": top or None,
                                       "histogram": {str(k + 1): int(n) for k, n in enumerate(hist)}},
            "end_reasons": dict(sorted(ends.items()))}


def lengths_by_turn(turn: np.ndarray, prompt: np.ndarray, completion: np.ndarray) -> dict[str, dict[str, Any]]:
    """Per turn index ("1", "2", …): rows, and the prompt and completion lengths' mean and median (p50)."""
    out = {}
    for t in sorted(set(np.asarray(turn).tolist())):
        sel = turn == t
        out[str(t)] = {"rows": int(sel.sum()),
                       "prompt": {"mean": _round(prompt[sel].mean()), "p50": _round(np.median(prompt[sel]))},
                       "completion": {"mean": _round(completion[sel].mean()),
                                      "p50": _round(np.median(completion[sel]))}}
    return out


def _round(x: float) -> float | int:
    x = float(x)
    return int(x) if x.is_integer() else round(x, 3)
