"""The held-out prompts: per partition, a seeded share of its first-turn prompts, never trained on.

A prompt's rank is sha256(seed, id), so the split does not depend on the order prompts are read in, and two datasets
probed from the same workdir with the same seed are measured on the same prompts. A conversation whose first prompt
is held out is held out whole (its later turns' rows are not trained on either)."""

from __future__ import annotations

import hashlib
from typing import Iterable

from kimi_eagle_data.records import PromptRecord

HELD_OUT = 6          # prompts per partition


def rank(seed: int, id_: str) -> str:
    return hashlib.sha256(f"probe\x1f{seed}\x1f{id_}".encode()).hexdigest()


def prompt_key(prompt_ids: Iterable[int]) -> str:
    """A prompt's token ids as one hash: how a row without our ids is matched to a prepared prompt."""
    return hashlib.sha256(",".join(map(str, prompt_ids)).encode()).hexdigest()


def held_out(records: list[PromptRecord], count: int, seed: int, max_prompt_len: int) -> list[PromptRecord]:
    """`count` first-turn prompts of one partition (fewer when it has fewer than 2 × count: half of them), shorter
    than `max_prompt_len` so the decoder has room to generate."""
    firsts = sorted((r for r in records if r.turn == 1 and len(r.prompt_ids) < max_prompt_len),
                    key=lambda r: rank(seed, r.id))
    return firsts[:min(count, len(firsts) // 2)]
