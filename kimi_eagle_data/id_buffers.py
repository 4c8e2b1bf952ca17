"""Token ids of many sequences as one (offsets, values) buffer pair, sequence i at values[offsets[i]:offsets[i + 1]]:
what every format's validator (`validate_many`) and the K2.5 grammar's `parse_many` take, one numpy pass per chunk
instead of one per sample."""

from __future__ import annotations

from typing import Sequence

import numpy as np


def _as_ids(ids: Sequence[int] | np.ndarray) -> np.ndarray:
    a = np.asarray(ids)
    if a.ndim != 1:
        a = a.reshape(-1)
    if a.dtype.kind not in "iu":
        a = a.astype(np.int64) if a.size else np.zeros(0, dtype=np.int64)
    elif a.dtype.kind == "u":
        a = a.astype(np.int64)
    return a


def pack(seqs: Sequence[Sequence[int] | np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Id sequences as one (offsets, values) buffer pair, sequence i at values[offsets[i]:offsets[i + 1]]:
    what `parse_many` and the validator's `validate_many` take. Values keep their integer width (int64 for
    Python lists)."""
    arrays = [_as_ids(x) for x in seqs]
    if len(arrays) == 1:          # one sequence: no copy
        return np.array([0, arrays[0].size], dtype=np.int64), arrays[0]
    offsets = np.zeros(len(arrays) + 1, dtype=np.int64)
    np.cumsum([a.size for a in arrays], out=offsets[1:])
    return offsets, (np.concatenate(arrays) if arrays else np.zeros(0, dtype=np.int64))


def rows_with(mask: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Per row of an (offsets, values) buffer: whether `mask` is set anywhere in it (empty rows: False)."""
    if not mask.any():    # the usual case: no cumulative sum over every token
        return np.zeros(len(offsets) - 1, dtype=bool)
    hits = np.zeros(len(mask) + 1, dtype=np.int64)
    np.cumsum(mask, out=hits[1:])
    return hits[offsets[1:]] > hits[offsets[:-1]]
