"""The draft vocabulary's raw material: how often each token id is a loss token (loss_mask 1) in a config's
`train` split, counted while emit writes the rows (one bincount per block of rows) and stored beside the data
(docs/data-format.md):

    dataset/token_freq/<CFG>.parquet    columns token_id (int32), count (int64); one row per id of the
                                        model's vocabulary, in id order (row i is id i, zeros included)

EAGLE-3 drafters predict over the most frequent ids only (a reduced draft vocabulary): `kimi-data export`
turns these counts into speculators' `token_freq.pt` and SpecForge's `d2t`/`t2d` mapping, and the card and
`kimi-data stats` report how many ids it takes to cover the loss tokens.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from kimi_eagle_data.store.workdir import atomic_path

TOKEN_FREQ_DIR = "token_freq"
FREQ_SCHEMA = pa.schema([("token_id", pa.int32()), ("count", pa.int64())])
COVERAGE_SHARES = (0.90, 0.95, 0.99, 0.999)    # the card's "ids that cover x% of the loss tokens"
DRAFT_VOCAB_SIZE = 32_000                      # EAGLE-3's usual draft vocabulary (`stats` reports its coverage)


def token_freq_path(dataset_root: Path, config: str) -> Path:
    return Path(dataset_root) / TOKEN_FREQ_DIR / f"{config}.parquet"


class TokenCounts:
    """Loss-token counts per id, summed over the tables added (order-free: the same rows give the same
    counts whatever the number of workers or blocks)."""

    def __init__(self, vocab_size: int = 0):
        self.counts = np.zeros(vocab_size, dtype=np.int64)

    def add_rows(self, table: pa.Table) -> None:
        """Count the ids of `table`'s input_ids where its loss_mask is 1."""
        ids = pc.list_flatten(table["input_ids"]).to_numpy()
        mask = pc.list_flatten(table["loss_mask"]).to_numpy()
        self.add_ids(ids[mask == 1])

    def add_ids(self, ids: np.ndarray) -> None:
        found = np.bincount(ids, minlength=len(self.counts))
        if len(found) > len(self.counts):    # an id beyond the declared vocabulary: counted, never dropped
            found[:len(self.counts)] += self.counts
            self.counts = found.astype(np.int64, copy=False)
        else:
            self.counts += found


def write_counts(path: Path, counts: np.ndarray) -> None:
    """Dense and in id order; delta-encoded, so the token_id column costs next to nothing (115-130 KB for
    Kimi-K2.5's 163,840 ids, measured on synthetic Zipf counts). Same counts, same bytes."""
    table = pa.Table.from_arrays([pa.array(np.arange(len(counts), dtype=np.int32)),
                                  pa.array(np.asarray(counts, dtype=np.int64))], schema=FREQ_SCHEMA)
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp, compression="zstd", use_dictionary=False,
                       column_encoding={"token_id": "DELTA_BINARY_PACKED", "count": "DELTA_BINARY_PACKED"})


def read_counts(path: Path) -> np.ndarray:
    """counts[id] from a token_freq file."""
    t = pq.ParquetFile(path).read(columns=["token_id", "count"])
    ids = t["token_id"].to_numpy()
    counts = np.zeros(int(ids.max()) + 1 if len(ids) else 0, dtype=np.int64)
    counts[ids] = t["count"].to_numpy()
    return counts


def add_counts(parts: list[np.ndarray]) -> np.ndarray:
    """The sum of counts arrays of any lengths."""
    total = np.zeros(max((len(p) for p in parts), default=0), dtype=np.int64)
    for p in parts:
        total[:len(p)] += p
    return total


def ids_to_cover(counts: np.ndarray, share: float) -> int | None:
    """The fewest ids whose counts together reach `share` of all loss tokens (None: no loss tokens)."""
    total = int(counts.sum())
    if not total:
        return None
    cumulative = np.cumsum(np.sort(counts)[::-1])
    need = math.ceil(round(share * total, 6))     # tokens; rounded first: 0.999 * 1000 is 998.99…
    return int(np.searchsorted(cumulative, need, side="left")) + 1


def top_share(counts: np.ndarray, k: int) -> float | None:
    """The share of the loss tokens that the k most frequent ids cover (None: no loss tokens)."""
    total = int(counts.sum())
    if not total:
        return None
    return float(np.sort(counts)[::-1][:k].sum()) / total


def coverage_by_config(counts: dict[str, np.ndarray | None]) -> dict | None:
    """The card's draft-vocabulary numbers: each config's coverage and all configs' together (None when a config
    has no counts: the section is left out)."""
    if not counts or any(c is None for c in counts.values()):
        return None
    total = add_counts(list(counts.values()))
    return {"shares": COVERAGE_SHARES, "vocab_size": len(total), "all": coverage(total),
            "configs": {name: coverage(c) for name, c in counts.items()}}


def coverage(counts: np.ndarray, top_k: int = DRAFT_VOCAB_SIZE) -> dict:
    """What the card and `stats` report of one set of counts."""
    return {"loss_tokens": int(counts.sum()), "distinct_ids": int(np.count_nonzero(counts)),
            "ids_to_cover": {f"{s:g}": ids_to_cover(counts, s) for s in COVERAGE_SHARES},
            "top_k": top_k, "top_k_share": top_share(counts, top_k)}
