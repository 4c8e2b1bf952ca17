"""The share of prompt tokens the engine served from its prefix cache, per config and per turn, from each
completion's own `cached_tokens` (SGLang's meta_info.cached_tokens, vLLM's usage.prompt_tokens_details.cached_tokens;
the checkpoint keeps it). `stats`, `plan` and the dataset card report it."""

from __future__ import annotations

from typing import Any

import numpy as np
from kimi_eagle_data.store.checkpoint_set import open_workdir_checkpoints


def cache_share(cached: np.ndarray, prompt: np.ndarray, turn: np.ndarray | None = None) -> dict[str, Any] | None:
    """Requests, prompt and cached tokens and the hit share (cached / prompt tokens) over the requests whose engine
    reported cached_tokens (NaN: not reported), and the same per turn index ("1", "2", …) when `turn` is given.
    None when no request has a count."""
    cached, prompt = np.asarray(cached, dtype=np.float64), np.asarray(prompt, dtype=np.float64)
    known = ~np.isnan(cached)
    if not known.any():
        return None

    def share(sel: np.ndarray) -> dict[str, Any]:
        c, p = cached[sel], np.where(np.isnan(prompt[sel]), 0.0, prompt[sel])
        return {"requests": int(sel.sum()), "requests_with_hit": int((c > 0).sum()), "prompt_tokens": int(p.sum()),
                "cached_tokens": int(c.sum()), "hit_share": round(float(c.sum() / p.sum()), 6) if p.sum() else None}

    out = share(known)
    if turn is not None:
        turn = np.asarray(turn)
        out["by_turn"] = {str(t): share(known & (turn == t)) for t in sorted(set(turn[known].tolist()))}
    return out


def workdir_cache(wd, configs) -> dict[str, dict[str, Any]]:
    """Config -> its prefix-cache hits (cache_share, per turn) over the rows validate wrote, for the card; configs
    whose engine reported no cached_tokens are left out."""
    import pyarrow.parquet as pq

    ckpt = open_workdir_checkpoints(wd)
    if ckpt is None:
        return {}
    try:
        stats = {r.id: r for r in ckpt.request_stats()}
    finally:
        ckpt.close()

    def column(ids: list[str], field: str) -> np.ndarray:
        return np.array([np.nan if (r := stats.get(i)) is None or getattr(r, field) is None else getattr(r, field)
                         for i in ids], dtype=np.float64)

    out = {}
    for config in configs:
        path = wd.validated(config)
        if not path.is_file():
            continue
        names = pq.read_schema(path).names
        t = pq.read_table(path, columns=["id"] + (["turn"] if "turn" in names else []))
        ids = t["id"].to_pylist()
        turns = t["turn"].to_numpy() if "turn" in names else np.ones(len(ids), dtype=np.int64)
        share = cache_share(column(ids, "cached_tokens"), column(ids, "prompt_tokens"), turns)
        if share is not None:
            out[config] = share
    return out
