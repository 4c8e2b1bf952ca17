"""What prefill costs, measured: the pilot's prefill and decode rates, which `plan` prices GPU-hours by, with the
prompt tokens the engine served from its prefix cache (store/cache_hits.py) and without.

The rates: a request's latency is taken as α × its prompt tokens not served from cache + β × its output tokens
(non-negative least squares over the pilot's requests, no intercept). α / β splits the time the pilot's engine was
busy (requests in flight) between prefill and decode; the prefill rate is the prefilled tokens over their share of
that time, the decode rate the output tokens over theirs. Under continuous batching a request's latency also holds
its wait for others, which slows both terms alike, so the split is what is measured, not the absolute α and β.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kimi_eagle_data.records import SpecDecodeCounts, describe_drafter, tokens_per_verify_step
from kimi_eagle_data.store.cache_hits import cache_share

# Fewer requests than this, or requests all alike in their prompt / output mix, leave α and β undetermined.
MIN_REQUESTS = 4


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


def drafter_acceptance(server_args: dict[str, Any], completion: np.ndarray, verify: np.ndarray,
                       counted: SpecDecodeCounts | None = None) -> dict | None:
    """The drafter the pilot's engine ran (the one its recorded server_args name, engines/drafter.py) and the
    acceptance it measured: output tokens per target verify step, over the requests that report their steps
    (SGLang's spec_verify_ct; vLLM's metrics.speculative_decoding.num_spec_steps) or, from a vLLM that reports none
    per request, the counters of its /metrics over the generate runs (`counted`: 1 + accepted / drafts). None when
    it ran none."""
    completion, verify = np.asarray(completion, dtype=np.float64), np.asarray(verify, dtype=np.float64)
    known = ~np.isnan(verify) & (verify > 0) & ~np.isnan(completion)
    drafter = describe_drafter(server_args)
    if drafter is None and not known.any():
        return None
    drafter = drafter or {"algorithm": None, "model": None, "num_steps": None, "num_draft_tokens": None}
    shape = {k: drafter[k] for k in ("algorithm", "model", "num_steps", "num_draft_tokens")}
    if counted is not None and not known.any():
        return {**shape, "measured_by": "the engine's counters (vLLM /metrics)", "requests": None,
                "verify_steps": counted.drafts, "accepted_draft_tokens": counted.accepted_tokens,
                "draft_tokens": counted.draft_tokens, "output_tokens": None,
                "tokens_per_verify_step": tokens_per_verify_step(counted)}
    steps, out = float(verify[known].sum()), float(completion[known].sum())
    return {**shape, "measured_by": "each request's verify steps (SGLang spec_verify_ct, vLLM num_spec_steps)"
            if known.any() else None,
            "requests": int(known.sum()), "verify_steps": int(steps), "output_tokens": int(out),
            "tokens_per_verify_step": round(out / steps, 4) if steps else None}


def add_drafter(result: dict[str, Any], ckpt, ids: list[str]) -> None:
    """Into `plan`'s result: `drafter` (drafter_acceptance of the pilot, or None) and, with it, per config and
    overall `target_steps`: the projected completion tokens over the measured tokens per verify step (the target's
    forward passes; without a drafter each output token is one). The GPU-hours at the pilot's measured speed already
    include what the drafter saved."""
    if ckpt is None:
        result["drafter"] = None
        return
    d = drafter_acceptance((ckpt.engine or {}).get("server_args") or {}, ckpt.column(ids, "completion_tokens"),
                           ckpt.column(ids, "spec_verify_ct"), ckpt.spec_decode)
    result["drafter"] = d
    rate = d["tokens_per_verify_step"] if d else None
    for entry in [*result["configs"].values(), result["overall"]]:
        entry["target_steps"] = None if not rate else {
            k: (None if v is None else round(v / rate, 3)) for k, v in entry["completion_tokens"].items()}
