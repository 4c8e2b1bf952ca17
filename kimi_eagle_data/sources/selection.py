"""Deterministic selection of source rows: seeded, streaming, machine-independent.

Every scanned row gets a *row key*: its stable source id from the adapter (the upstream key, or
a content hash where the upstream has none), or `row:<n>` for a row the adapter cannot read (named by its id
where it is rejected, when its id column reads).
Its rank is a keyed hash, `blake2b(row key, key="<seed>:<config>")` read as a 64-bit integer;
the selection is the rows with the smallest ranks, in rank order (ties: row number). That is a
uniform random sample without replacement, identical on every machine for the same seed and
inputs (no RNG state, no dependence on reading order), and it streams: only the best
`ceil(n × oversample) + 16` rows are held (a bounded heap), so a Hub stream of millions of rows
is read once without being loaded.

Rows sharing a row key (OpenThoughts' 16x repeated questions, OpenCodeReasoning's ~26 answers
per question) have the same rank: the first one read is kept. A later row that gives the same
prompts (its messages, tools and, under own_history, the script; the upstream answer may differ)
is counted (`Candidate.repeats`; `repeated_rows` in the prepare report) but not selected, so not
rejected either: the selection samples distinct rows. A later row whose prompts differ is another
conversation under the same id (a user's JSONL with an id given twice, ShareGPT ids seen twice):
it is selected right after the first and rejected with reason `repeated_id`, so it is counted
where every rejected row is, never dropped without a word.

`prepare` consumes the selection in order until `n` prompts pass every filter; the oversampling
margin covers the rows that filters reject. If the margin runs out first the report says so
(`exhausted`), and a larger `oversample` fixes it.
"""

from __future__ import annotations

import hashlib
import heapq
import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Iterable

from kimi_eagle_data.sources.adapters import readable_id
from kimi_eagle_data.sources.policies import PrefixItem, adapt_row
from kimi_eagle_data.sources.partitions import Partition
from kimi_eagle_data.records import SourceRowError
from kimi_eagle_data.sources.readers import SourceRow


def rank(seed: int, config: str, row_key: str) -> int:
    h = hashlib.blake2b(row_key.encode("utf-8", "surrogatepass"), digest_size=8,
                        key=f"{seed}:{config}".encode()[:64])
    return int.from_bytes(h.digest(), "big")


@dataclass
class Candidate:
    rank: int
    row_number: int
    row_key: str
    items: list[PrefixItem] | None          # None when the row failed as a whole
    error: SourceRowError | None = None
    repeats: int = 0                         # later rows with the same key and prompts (not selected themselves)
    # A row failed as a whole whose id column reads: its id names it where it is rejected (its `row:<n>` key still
    # ranks it, so the selection stays what it was).
    readable_id: str | None = None

    @property
    def name(self) -> str:
        return self.readable_id or self.row_key


@dataclass
class ScanStats:
    scanned: int = 0
    capacity: int | None = None             # rows the heap holds (None: all)
    duplicate_row_keys: int = 0
    errors: Counter = field(default_factory=Counter)   # row-level failures among all scanned rows


def prompts_of(items: list[PrefixItem] | None) -> list[tuple] | None:
    """What a row's prompts are, to tell a repeat from another conversation under the same key: each prompt's
    id, messages, tools and script, or the code of the prefix that could not be read. The source's answers are
    left out (OpenCodeReasoning gives one question ~26 answers, OpenThoughts repeats a question with others): the
    prompt's own and, in the script, an assistant turn's text; its tool calls stay, the model's must match them."""
    if items is None:
        return None
    return [(sid, item.code) if isinstance(item, SourceRowError) else
            (sid, item.messages, item.tools, [("assistant", m.get("tool_calls")) if m.get("role") == "assistant"
                                              else m for m in item.script or ()])
            for sid, item in items]


def repeated_id(key: str, first: Candidate) -> SourceRowError:
    return SourceRowError("repeated_id", f"source id {key!r} was given to row {first.row_number} too, with other "
                                         "content: this row is not prepared; give each conversation an id of its own")


def capacity_for(n: int | None, oversample: float) -> int | None:
    return None if n is None else math.ceil(n * max(1.0, oversample)) + 16


def select(partition: Partition, rows: Iterable[SourceRow], *, n: int | None = None, seed: int | None = None,
           oversample: float | None = None, stats: ScanStats | None = None) -> list[Candidate]:
    """The candidate rows in rank order (at most `capacity_for(n, oversample)` of them)."""
    n = partition.n if n is None else n
    seed = partition.seed if seed is None else seed
    cap = capacity_for(n, partition.oversample if oversample is None else oversample)
    stats = stats if stats is not None else ScanStats()
    stats.capacity = cap
    heap: list[tuple[int, int, int, Candidate]] = []   # (-rank, -row, tiebreak, cand): a max-heap
    held: dict[str, Candidate] = {}                    # row key -> its candidate, for keys in the heap
    for row_n, row in rows:
        stats.scanned += 1
        items: list[PrefixItem] | None = None
        error: SourceRowError | None = None
        named = None
        if isinstance(row, SourceRowError):
            key, error = f"row:{row_n}", row
        else:
            try:
                key, items = adapt_row(partition.adapter, row, partition.policy, id_field=partition.id_field)
            except SourceRowError as e:
                key, error = f"row:{row_n}", e
                named = readable_id(partition.adapter, row, partition.id_field)
        if error is not None:
            stats.errors[error.code] += 1
        r = rank(seed, partition.config, key)
        first = held.get(key)
        if first is not None:
            if prompts_of(items) == prompts_of(first.items):     # row:<n> keys never repeat
                stats.duplicate_row_keys += 1
                first.repeats += 1
                continue
            items, error = None, repeated_id(key, first)   # ranked with the first, right after it
        if cap is not None and len(heap) >= cap:
            worst = heap[0]
            if (r, row_n) >= (-worst[0], -worst[1]):
                continue
            cand = Candidate(r, row_n, key, items, error, readable_id=named)
            heapq.heapreplace(heap, (-r, -row_n, row_n, cand))
            if held.get(worst[3].row_key) is worst[3]:      # not a repeated_id row: its first is still held
                del held[worst[3].row_key]
        else:
            cand = Candidate(r, row_n, key, items, error, readable_id=named)
            heapq.heappush(heap, (-r, -row_n, row_n, cand))
        held.setdefault(key, cand)
    return sorted((c for *_, c in heap), key=lambda c: (c.rank, c.row_number))
