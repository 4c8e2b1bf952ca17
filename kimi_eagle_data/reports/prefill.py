"""What prefill costs, measured: the share of prompt tokens the engine served from its prefix cache (its own
`cached_tokens` per request: SGLang's meta_info.cached_tokens, vLLM's usage.prompt_tokens_details.cached_tokens),
per config and per turn; and the pilot's prefill and decode rates, which `plan` prices GPU-hours with and without
the cache by.

The rates: a request's latency is taken as α × its prompt tokens not served from cache + β × its output tokens
(non-negative least squares over the pilot's requests, no intercept). α / β splits the time the pilot's engine was
busy (requests in flight) between prefill and decode; the prefill rate is the prefilled tokens over their share of
that time, the decode rate the output tokens over theirs. Under continuous batching a request's latency also holds
its wait for others, which slows both terms alike, so the split is what is measured, not the absolute α and β.
"""

from __future__ import annotations

from typing import Any

import numpy as np

# Fewer requests than this, or requests all alike in their prompt / output mix, leave α and β undetermined.
MIN_REQUESTS = 4


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


def fit_rates(prompt: np.ndarray, cached: np.ndarray, completion: np.ndarray, latency: np.ndarray,
              busy_s: float) -> dict[str, Any] | None:
    """The pilot's prefill and decode rates (module doc), or None when they cannot be measured (too few requests
    with a latency, no busy time, a degenerate fit)."""
    from scipy.optimize import nnls

    prompt, completion, latency = (np.asarray(a, dtype=np.float64) for a in (prompt, completion, latency))
    cached = np.where(np.isnan(np.asarray(cached, dtype=np.float64)), 0.0, cached)
    ok = ~np.isnan(prompt) & ~np.isnan(completion) & ~np.isnan(latency) & (latency > 0)
    if ok.sum() < MIN_REQUESTS or busy_s <= 0:
        return None
    prefilled = np.maximum(prompt[ok] - cached[ok], 0.0)
    out = completion[ok]
    (alpha, beta), _ = nnls(np.column_stack([prefilled, out]), latency[ok])
    prefill_s, decode_s = alpha * prefilled.sum(), beta * out.sum()
    if decode_s <= 0:
        return None
    # a = 0: the latencies show no cost of prefill (a CPU engine that runs its batch's prompts with its decode): its
    # rate is left unknown (None) and prefill priced at nothing.
    share = prefill_s / (prefill_s + decode_s)
    share = 0.0 if share < 1e-6 else share      # a least-squares zero is a round-off away from it
    return {"method": "latency = a x prefilled tokens + b x output tokens (non-negative least squares over the "
                      "pilot's requests); a / b splits the pilot's busy time between prefill and decode",
            "requests": int(ok.sum()), "prefill_share_of_time": round(float(share), 6),
            "prefill_tokens_per_s": round(float(prefilled.sum() / (share * busy_s)), 3) if share > 0 else None,
            "decode_tokens_per_s": round(float(out.sum() / ((1 - share) * busy_s)), 3),
            "prefilled_tokens": int(prefilled.sum()), "output_tokens": int(out.sum())}


def priced_hours(prompt_iv: dict, completion_iv: dict, hit_share: float | None, rates: dict[str, Any] | None,
                 gpus: int, speed: float = 1.0) -> dict[str, dict[str, float | None]] | None:
    """GPU-hours of projected prompt and completion tokens ({estimate, low, high} each) at the pilot's rates ×
    `speed` (the given throughput over the measured one): `with_cache` prefilling the prompt tokens the pilot's
    cache did not serve, `without_cache` prefilling every prompt token. None without rates."""
    if rates is None:
        return None
    d_rate = rates["decode_tokens_per_s"] * speed
    # No measured prefill cost (module doc): prefill priced at nothing.
    p_cost = 0.0 if rates["prefill_tokens_per_s"] is None else 1.0 / (rates["prefill_tokens_per_s"] * speed)
    miss = 1.0 - (hit_share or 0.0)

    def hours(prefilled_share: float) -> dict[str, float | None]:
        out = {}
        for k in ("estimate", "low", "high"):
            p, c = prompt_iv.get(k), completion_iv.get(k)
            out[k] = None if p is None or c is None else round((p * prefilled_share * p_cost + c / d_rate)
                                                               / 3600 * gpus, 4)
        return out

    return {"with_cache": hours(miss), "without_cache": hours(1.0)}


def add_prefill_pricing(result: dict[str, Any], ckpt, pilot: dict[str, tuple[list[str], np.ndarray]],
                        gpus: int) -> None:
    """Into `plan`'s result: `prefill` (the pilot's rates, or None), and per config and overall `cache` (the pilot's
    hit share, per turn) and `gpu_hours_prefill` ({with_cache, without_cache}: GPU-hours at those rates; None
    without them). `pilot`: config -> (its pilot ids, their turn indices); `ckpt`: stats.CheckpointInfo or None."""
    throughput = result["throughput"]
    measured = throughput.get("measured")
    rates = None
    if ckpt is not None and measured:
        ids = [i for config_ids, _ in pilot.values() for i in config_ids]
        rates = fit_rates(*(ckpt.column(ids, f) for f in ("prompt_tokens", "cached_tokens", "completion_tokens",
                                                          "latency_s")), measured["span_s"])
    # A given --throughput (the deployment's) scales both rates alike: the pilot measured their ratio.
    speed = (throughput["tokens_per_s"] / measured["tokens_per_s"]
             if rates and throughput["source"] == "given" and measured["tokens_per_s"] else 1.0)
    result["prefill"] = None if rates is None else {**rates, "speed_factor": round(speed, 6)}
    weighted, prompt_total = 0.0, 0.0
    for config, entry in result["configs"].items():
        ids, turns = pilot[config]
        cache = None if ckpt is None else cache_share(ckpt.column(ids, "cached_tokens"),
                                                      ckpt.column(ids, "prompt_tokens"), turns)
        entry["cache"] = cache
        hit = cache["hit_share"] if cache else None
        entry["gpu_hours_prefill"] = priced_hours(entry["prompt_tokens"], entry["completion_tokens"], hit, rates,
                                                  gpus, speed)
        projected = entry["prompt_tokens"]["estimate"] or 0.0
        weighted += projected * (hit or 0.0)
        prompt_total += projected
    overall = result["overall"]
    hit = weighted / prompt_total if prompt_total else None
    overall["cache"] = None if hit is None or all(e["cache"] is None for e in result["configs"].values()) \
        else {"hit_share": round(hit, 6)}
    overall["gpu_hours_prefill"] = priced_hours(overall["prompt_tokens"], overall["completion_tokens"],
                                                overall["cache"]["hit_share"] if overall["cache"] else None, rates,
                                                gpus, speed)


def workdir_cache(wd, configs) -> dict[str, dict[str, Any]]:
    """Config -> its prefix-cache hits (cache_share, per turn) over the rows validate wrote, for the card; configs
    whose engine reported no cached_tokens are left out."""
    import pyarrow.parquet as pq

    from kimi_eagle_data.reports.stats import read_checkpoint_info

    ckpt = read_checkpoint_info(wd)
    if ckpt is None:
        return {}
    out = {}
    for config in configs:
        path = wd.validated(config)
        if not path.is_file():
            continue
        names = pq.read_schema(path).names
        t = pq.read_table(path, columns=["id"] + (["turn"] if "turn" in names else []))
        ids = t["id"].to_pylist()
        turns = t["turn"].to_numpy() if "turn" in names else np.ones(len(ids), dtype=np.int64)
        share = cache_share(ckpt.column(ids, "cached_tokens"), ckpt.column(ids, "prompt_tokens"), turns)
        if share is not None:
            out[config] = share
    return out
