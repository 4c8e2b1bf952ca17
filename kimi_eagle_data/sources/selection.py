"""Deterministic selection of source rows: seeded, streaming, machine-independent.

Every scanned row gets a *row key*: its stable source id from the adapter (the upstream key, or
a content hash where the upstream has none), or `row:<n>` for a row the adapter cannot read.
Its rank is a keyed hash, `blake2b(row key, key="<seed>:<config>")` read as a 64-bit integer;
the selection is the rows with the smallest ranks, in rank order (ties: row number). That is a
uniform random sample without replacement, identical on every machine for the same seed and
inputs (no RNG state, no dependence on reading order), and it streams: only the best
`ceil(n × oversample) + 16` rows are held (a bounded heap), so a Hub stream of millions of rows
is read once without being loaded.

Rows sharing a row key (OpenThoughts' 16x repeated questions, OpenCodeReasoning's ~26 answers
per question, ShareGPT ids seen twice) have the same rank: the first one read is kept, the
others are counted (`Candidate.repeats`; `repeated_rows` in the prepare report) but not
selected, so not rejected either: the selection samples distinct rows.

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
    repeats: int = 0                         # later rows with the same key (not selected themselves)


@dataclass
class ScanStats:
    scanned: int = 0
    capacity: int | None = None             # rows the heap holds (None: all)
    duplicate_row_keys: int = 0
    errors: Counter = field(default_factory=Counter)   # row-level failures among all scanned rows


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
        if isinstance(row, SourceRowError):
            key, error = f"row:{row_n}", row
        else:
            try:
                key, items = adapt_row(partition.adapter, row, partition.policy, id_field=partition.id_field)
            except SourceRowError as e:
                key, error = f"row:{row_n}", e
        if error is not None:
            stats.errors[error.code] += 1
        r = rank(seed, partition.config, key)
        if key in held:
            stats.duplicate_row_keys += 1
            held[key].repeats += 1
            continue
        if cap is not None and len(heap) >= cap:
            worst = heap[0]
            if (r, row_n) >= (-worst[0], -worst[1]):
                continue
            cand = Candidate(r, row_n, key, items, error)
            heapq.heapreplace(heap, (-r, -row_n, row_n, cand))
            held.pop(worst[3].row_key, None)
        else:
            cand = Candidate(r, row_n, key, items, error)
            heapq.heappush(heap, (-r, -row_n, row_n, cand))
        held[key] = cand
    return sorted((c for *_, c in heap), key=lambda c: (c.rank, c.row_number))
