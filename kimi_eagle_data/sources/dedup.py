"""Prompt deduplication: exact (normalized text) and near-duplicate (MinHash + LSH), within one
config and across the configs prepared together.

Normalization (`normalize`): Unicode NFKC, `str.casefold()`, every run of whitespace collapsed to
one space, stripped. The exact key of a prompt is the normalized text of every message (role and
content, in order) plus the tools as canonical JSON; two prompts that differ only in case, width
forms or spacing are the same prompt. The first prompt (in processing order: configs in the
order of the run, prompts in selection order) is kept; later ones are rejected as
`duplicate_prompt` naming the kept id.

Near duplicates (opt-in): MinHash over word shingles of the normalized *user turns* (system prompts
and tools are shared boilerplate in some sources and would make everything look alike), through
`rensa` (R-MinHash and its LSH index, in Rust; benchmarks/bench_dedup.py compares it with datasketch
and a numpy MinHash on the same rows: the same flags up to the estimate's noise near the threshold,
an order of magnitude faster). The seed is fixed and rensa hashes tokens with its own seeded hash
(not Python's `hash`), so one rensa release gives the same signatures, and flags the same rows, on
every run (pinned: a new release may change its algorithm version and so the flagged rows).
Candidates come from LSH banding; a candidate counts when the estimated Jaccard similarity (the
share of equal signature slots) reaches `threshold`; among those the earliest kept prompt is named.
Rejected as `near_duplicate` naming the kept id.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from dataclasses import dataclass
from typing import Any

import orjson
from rensa import RMinHash, RMinHashLSH

_WORD = re.compile(r"\w+")


@dataclass(frozen=True)
class DedupSettings:
    exact: bool = True
    across_configs: bool = True            # a prompt in an earlier config blocks the same prompt later
    near: bool = False
    near_threshold: float = 0.85
    shingle_words: int = 5
    num_perm: int = 128


def normalize(text: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def shingles(text: str, k: int) -> list[str]:
    """The `k`-word shingles of the normalized text (one shingle when it has k words or fewer; none: no words)."""
    words = _WORD.findall(normalize(text))
    if len(words) <= k:
        return [" ".join(words)] if words else []
    return [" ".join(words[i:i + k]) for i in range(len(words) - k + 1)]


def exact_key(messages: list[dict[str, Any]], tools: Any) -> bytes:
    parts = [f"{m.get('role')}\x1e{normalize(m.get('content') or '')}" for m in messages]
    if tools:
        parts.append("tools\x1e" + normalize(orjson.dumps(tools, option=orjson.OPT_SORT_KEYS).decode()))
    return hashlib.blake2b("\x1f".join(parts).encode("utf-8", "surrogatepass"), digest_size=16).digest()


class ExactDedup:
    def __init__(self, across_configs: bool = True):
        self.across = across_configs
        self.seen: dict[bytes, str] = {}

    def _key(self, config: str, key: bytes) -> bytes:
        return key if self.across else config.encode() + b"\x1f" + key

    def check(self, config: str, key: bytes) -> str | None:
        return self.seen.get(self._key(config, key))

    def add(self, config: str, key: bytes, id_: str) -> None:
        self.seen.setdefault(self._key(config, key), id_)


def _bands_for(num_perm: int, threshold: float) -> tuple[int, int]:
    """(bands, rows) with bands·rows = num_perm whose S-curve midpoint (1/b)^(1/r) sits just below
    the threshold (candidates are verified against the threshold afterwards)."""
    best = None
    for r in range(1, num_perm + 1):
        if num_perm % r:
            continue
        b = num_perm // r
        mid = (1 / b) ** (1 / r)
        if mid <= threshold - 0.05 or r == 1:
            if best is None or r > best[1]:
                best = (b, r)
    return best or (num_perm, 1)


class MinHashDedup:
    def __init__(self, threshold: float = 0.85, shingle_words: int = 5, num_perm: int = 128, seed: int = 1):
        if not 0 < threshold <= 1:
            raise ValueError("near_threshold must be in (0, 1]")
        self.threshold = threshold
        self.k = shingle_words
        self.num_perm = num_perm
        self.seed = seed
        self.bands, self.rows = _bands_for(num_perm, threshold)
        self.lsh = RMinHashLSH(threshold=threshold, num_perm=num_perm, num_bands=self.bands)
        self.sigs: list[RMinHash] = []
        self.ids: list[str] = []
        self.configs: list[str] = []

    def shingles(self, text: str) -> list[str]:
        return shingles(text, self.k)

    def signature(self, text: str) -> RMinHash | None:
        """The MinHash of the text's word shingles (None: no words)."""
        sh = self.shingles(text)
        if not sh:
            return None
        sig = RMinHash(num_perm=self.num_perm, seed=self.seed)
        sig.update(sh)      # shingles hold \w words only: never a lone surrogate, which rensa cannot encode
        return sig

    def check(self, config: str, sig: RMinHash | None, across_configs: bool = True) -> tuple[str, float] | None:
        """(kept id, estimated Jaccard) of the first earlier prompt at or above the threshold."""
        if sig is None:
            return None
        for j in sorted(self.lsh.query(sig)):
            if not across_configs and self.configs[j] != config:
                continue
            sim = sig.jaccard(self.sigs[j])
            if sim >= self.threshold:
                return self.ids[j], sim
        return None

    def add(self, config: str, sig: RMinHash | None, id_: str) -> None:
        if sig is None:
            return
        self.lsh.insert(len(self.ids), sig)
        self.sigs.append(sig)
        self.ids.append(id_)
        self.configs.append(config)
