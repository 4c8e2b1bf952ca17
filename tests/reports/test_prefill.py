"""The share of prompt tokens served from the engine's prefix cache, and prefill priced at the pilot's measured
rates (reports/prefill.py): the arithmetic on known numbers, then `plan` on a built workdir."""

from __future__ import annotations

import json
import math

import numpy as np

from kimi_eagle_data.reports.prefill import fit_rates, priced_hours
from kimi_eagle_data.store.cache_hits import cache_share
from tests.helpers.cli import run_cli


def test_cache_share_counts_only_requests_with_a_count_and_splits_by_turn():
    cached = np.array([0, 90, np.nan, 180, 0])
    prompt = np.array([100, 120, 50, 200, 100])
    turn = np.array([1, 2, 2, 3, 1])
    s = cache_share(cached, prompt, turn)
    assert (s["requests"], s["requests_with_hit"], s["prompt_tokens"], s["cached_tokens"]) == (4, 2, 520, 270)
    assert math.isclose(s["hit_share"], 270 / 520, rel_tol=1e-5)
    assert s["by_turn"]["1"]["hit_share"] == 0 and s["by_turn"]["2"]["requests"] == 1
    assert math.isclose(s["by_turn"]["3"]["hit_share"], 0.9)
    assert cache_share(np.array([np.nan]), np.array([10])) is None


def test_rates_split_the_busy_time_as_the_latencies_do():
    rng = np.random.default_rng(0)
    prompt = rng.integers(100, 4000, 200).astype(float)
    cached = np.floor(prompt * rng.uniform(0, 0.9, 200))
    out = rng.integers(10, 2000, 200).astype(float)
    a, b = 0.0002, 0.02                              # s per prefilled token, per output token
    latency = a * (prompt - cached) + b * out
    r = fit_rates(prompt, cached, out, latency, busy_s=100.0)
    prefill_s, decode_s = a * (prompt - cached).sum(), b * out.sum()
    assert math.isclose(r["prefill_share_of_time"], prefill_s / (prefill_s + decode_s), rel_tol=1e-4)
    # the busy time is the two rates' work
    assert math.isclose(r["prefilled_tokens"] / r["prefill_tokens_per_s"] + r["output_tokens"] / r["decode_tokens_per_s"],
                        100.0, rel_tol=1e-4)
    assert fit_rates(prompt[:2], cached[:2], out[:2], latency[:2], 10.0) is None      # too few to tell
    flat = fit_rates(prompt, cached, out, b * out, busy_s=100.0)      # latencies blind to the prompt
    assert flat["prefill_share_of_time"] == 0 and flat["prefill_tokens_per_s"] is None
    assert math.isclose(flat["decode_tokens_per_s"], out.sum() / 100.0)


def test_priced_hours_prefill_what_the_cache_did_not_serve():
    rates = {"prefill_tokens_per_s": 1000.0, "decode_tokens_per_s": 100.0}
    iv = lambda x: {"estimate": x, "low": x * 0.9, "high": x * 1.1}     # noqa: E731
    h = priced_hours(iv(3_600_000), iv(360_000), 0.75, rates, gpus=8)
    assert math.isclose(h["without_cache"]["estimate"], (3600 + 3600) / 3600 * 8)
    assert math.isclose(h["with_cache"]["estimate"], (900 + 3600) / 3600 * 8)
    assert priced_hours(iv(1), iv(1), 0.5, None, gpus=8) is None
    free = priced_hours(iv(3_600_000), iv(360_000), 0.75, {**rates, "prefill_tokens_per_s": None}, gpus=8)
    assert free["with_cache"] == free["without_cache"] and math.isclose(free["with_cache"]["estimate"], 8.0)


def test_plan_prices_prefill_from_the_pilot(conversation_run):
    workdir, _ = conversation_run
    r = json.loads(run_cli("plan", "--workdir", str(workdir), "--json", "--counts", "C1=1000", "--counts",
                           "C2=1000").stdout)
    pre = r["prefill"]
    # The local engine answers a batch at once, each answer with the batch's time: its latencies show no cost of
    # prefill, so prefill is priced at nothing (its rate unknown).
    assert pre is not None and pre["decode_tokens_per_s"] > 0
    assert pre["prefill_share_of_time"] == 0 and pre["prefill_tokens_per_s"] is None
    for c in ("C1", "C2"):
        cache = r["configs"][c]["cache"]
        assert cache["hit_share"] == 0        # the local engine keeps no cache: with and without are the same
        h = r["configs"][c]["gpu_hours_prefill"]
        assert h["with_cache"]["estimate"] == h["without_cache"]["estimate"] > 0
    assert set(r["configs"]["C1"]["cache"]["by_turn"]) == {str(t) for t in
                                                           r["configs"]["C1"]["pilot"]["turns"]["by_turn"]}
    text = run_cli("plan", "--workdir", str(workdir), "--counts", "C1=1000", "--counts", "C2=1000").stdout
    assert "prefix-cache hits" in text and "every prompt token prefilled" in text


def test_the_card_says_what_the_engine_served_from_cache(conversation_run):
    workdir, _ = conversation_run
    stats = json.loads(run_cli("stats", "--workdir", str(workdir), "--json", "--no-plots").stdout)
    card = (workdir / "dataset" / "README.md").read_text()
    line = next(ln for ln in card.splitlines() if ln.startswith("| prompt tokens served from the engine's prefix"))
    turns = stats["configs"]["C1"]["cache"]["by_turn"]
    assert f"C1 0.0% (turn {', '.join(f'{t}: 0.0%' for t in turns)})" in line and "C2 0.0%" in line
