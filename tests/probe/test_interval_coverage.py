"""The probe's intervals cover at their stated level: a simulation of probes at the default sizes.

Each simulated probe measures the default arms (own, upstream, own 0.25, own 0.5), DEFAULT_SEEDS drafters each, on
HELD_OUT held-out prompts in each of 8 configs, as the stage hands them to the report: per prompt and seed, the tokens
decoded and the verify steps they took. The data-generating model has what a real probe has (the seeds' spreads as
measured on the K2.5 demo: 4 seeds of the own arm spread by 0.12 of its accepted drafts per step, those of the
upstream arm by 0.30; docs/probe.md):

- every drafter decodes the same tokens on a prompt (lossless greedy decoding: the target's own output), up to 96,
  fewer where the answer stops;
- acceptance = 1 + accepted drafts per step, the accepted drafts of (arm, config, prompt, seed) the arm's mean times
  exp(config + prompt + seed + interaction) effects, capped at k + 1 = 4; a prompt's effect is shared in part by the
  arms (an easy prompt is easy for every drafter); the arms' seed spreads differ (ARMS);
- steps = tokens / acceptance, so about 15–90 steps a prompt at acceptance 1.1–2.1.

The truth is each arm's pooled ratio over a large population of prompts and seeds; an interval covers when it holds
it. Coverage is counted over REPLICATIONS simulated probes (deterministic seeds), for every arm's acceptance and for
the paired gain own − upstream, per config and pooled. The method the report replaced (a percentile bootstrap over
prompts, seeds summed into each prompt) misses the seeds' spread: its stand-in here, the same interval without a
seeds' part, must fall short, which shows the simulation can tell.
"""

from __future__ import annotations

import numpy as np
import pytest

from kimi_eagle_data.probe.interval import (COVERING_PROMPTS, CONFIDENCE, MIN_SEED_DF, difference_interval, parts,
                                            pooled_share, ratio_interval)
from kimi_eagle_data.probe.split import HELD_OUT
from kimi_eagle_data.probe.stage import MAX_NEW_TOKENS, SEEDS

REPLICATIONS = 2000
CONFIGS = 8
# (arm, mean acceptance, seed spread as a share of the accepted drafts per step)
ARMS = (("own", 1.30, 0.12), ("upstream", 1.15, 0.30), ("own 0.25", 1.25, 0.17), ("own 0.5", 1.28, 0.10))
# On the log of the accepted drafts per step; the K2.5 demo's (4 seeds, 92 prompts) measured prompts 0.51 (own) and
# 0.80 (upstream), prompt × seed 0.42 and 0.57, and 10–90% of its prompts took 12–85 steps.
PROMPT_SD, SHARED, INTERACTION_SD, CONFIG_SD = 0.6, 0.7, 0.5, 0.25
STOPPED, MIN_TOKENS = 0.4, 15        # the share of prompts whose answer stops before 96 tokens, and its shortest


def simulate(rng, replications: int, configs: int, prompts: int, seeds: int, config_effect: np.ndarray,
             arms=ARMS, scale: float = 1.0) -> tuple[np.ndarray, list[np.ndarray]]:
    """(tokens (R, P, K), each arm's steps (R, P, K)) of `replications` probes; `scale` multiplies every mean's
    accepted drafts (acceptance 1.1 → 2.1 at 5)."""
    n = configs * prompts
    tokens = np.where(rng.random((replications, n)) < STOPPED, rng.integers(MIN_TOKENS, MAX_NEW_TOKENS + 1,
                                                                              (replications, n)), MAX_NEW_TOKENS)
    tokens = np.broadcast_to(tokens[..., None].astype(float), (replications, n, seeds))
    config = np.repeat(config_effect, prompts)
    shared = rng.normal(0, PROMPT_SD, (replications, n))
    steps = []
    for _, mean, seed_sd in arms:
        prompt = SHARED * shared + np.sqrt(1 - SHARED ** 2) * rng.normal(0, PROMPT_SD, (replications, n)) + config
        seed = rng.normal(0, seed_sd, (replications, 1, seeds))
        noise = rng.normal(0, INTERACTION_SD, (replications, n, seeds))
        acceptance = np.minimum(1 + (mean - 1) * scale * np.exp(prompt[..., None] + seed + noise), 4.0)
        steps.append(np.maximum(1.0, np.round(tokens / acceptance)))
    return tokens, steps


def truth(config_effect: np.ndarray, scale: float, arms=ARMS) -> list[float]:
    """Each arm's pooled ratio over 32,000 prompts × 512 seeds of the configs."""
    tokens, steps = simulate(np.random.default_rng(12345), 8, len(config_effect), 4000 // len(config_effect), 64,
                             config_effect, arms, scale)
    return [float(tokens.sum() / s.sum()) for s in steps]


def coverage(configs: int, prompts: int, seeds: int, scale: float = 1.0, seeds_part: bool = True, arms=ARMS
             ) -> dict[str, float]:
    """Each arm's and the gain's coverage over REPLICATIONS probes (the first two arms: own, then upstream)."""
    config_effect = np.random.default_rng(7).normal(0, CONFIG_SD, configs)
    true = truth(config_effect, scale, arms)
    tokens, steps = simulate(np.random.default_rng(2024 + configs + prompts), REPLICATIONS, configs, prompts, seeds,
                             config_effect, arms, scale)
    strata = np.repeat(np.arange(configs), prompts)
    measured = [parts(tokens, s, strata) for s in steps]
    share, seed_df = pooled_share(measured) if seeds_part else (np.zeros(REPLICATIONS), 0)
    got = {}
    for (name, *_), arm, theta in zip(arms, measured, true):
        _, low, high, _ = ratio_interval(arm, share, seed_df)
        got[name] = float(np.mean((low <= theta) & (theta <= high)))
    _, low, high, _ = difference_interval(measured[0], measured[1], strata, share, seed_df)
    got["gain own − upstream"] = float(np.mean((low <= true[0] - true[1]) & (true[0] - true[1] <= high)))
    return got


def test_the_simulated_probe_is_shaped_like_real_probe_output():
    tokens, steps = simulate(np.random.default_rng(1), 200, CONFIGS, HELD_OUT, 2,
                             np.random.default_rng(7).normal(0, CONFIG_SD, CONFIGS))
    for arm, s in zip(ARMS, steps):
        acceptance = tokens.sum((1, 2)) / s.sum((1, 2))
        assert 1.08 < np.median(acceptance) < 1.4, arm
    per_prompt = np.concatenate([s.ravel() for s in steps])
    assert 8 <= np.quantile(per_prompt, 0.1) <= 30 and 60 <= np.quantile(per_prompt, 0.9) <= 95
    high = simulate(np.random.default_rng(1), 200, CONFIGS, HELD_OUT, 2, np.zeros(CONFIGS), scale=4)
    assert 1.7 < np.median(high[0].sum((1, 2)) / high[1][0].sum((1, 2))) < 2.3


@pytest.mark.parametrize("arms", [ARMS, ARMS[:2]], ids=["4 arms", "own and upstream (--no-curve)"])
@pytest.mark.parametrize("scale", [1.0, 4.0], ids=["acceptance ~1.1-1.3", "acceptance ~1.5-2.1"])
@pytest.mark.parametrize("configs", [1, CONFIGS], ids=["one config", "all configs pooled"])
def test_intervals_cover_at_the_default_sizes(configs, scale, arms):
    got = coverage(configs, HELD_OUT, len(SEEDS), scale, arms=arms)
    low = {k: v for k, v in got.items() if v < CONFIDENCE - 0.02}
    assert not low, f"coverage below {CONFIDENCE - 0.02:.0%} at nominal {CONFIDENCE:.0%}: {got}"


def test_intervals_cover_down_to_the_covering_size():
    for configs in (1, CONFIGS):
        got = coverage(configs, COVERING_PROMPTS, len(SEEDS))
        assert min(got.values()) >= CONFIDENCE - 0.02, (configs, got)
    assert HELD_OUT >= COVERING_PROMPTS and len(ARMS[:2]) * (len(SEEDS) - 1) >= MIN_SEED_DF


def test_without_the_seeds_part_the_pooled_interval_falls_short():
    got = coverage(CONFIGS, HELD_OUT, len(SEEDS), seeds_part=False)
    assert min(got.values()) < 0.9, got       # the arm whose drafters spread most falls short


def former_bootstrap(configs: int, prompts: int, seeds: int, scale: float = 1.0, replications: int = 500,
                     resamples: int = 1000) -> tuple[float, float]:
    """Coverage of the method the report replaced, own and gain: a percentile bootstrap over prompts of the pooled
    ratio, each prompt carrying its tokens and steps summed over the seeds (for the table only: slow)."""
    config_effect = np.random.default_rng(7).normal(0, CONFIG_SD, configs)
    true = truth(config_effect, scale)
    tokens, steps = simulate(np.random.default_rng(99 + configs + prompts), replications, configs, prompts, seeds,
                             config_effect, scale=scale)
    rng = np.random.default_rng(0)
    n = configs * prompts
    hits = np.zeros(2)
    for r in range(replications):
        pick = rng.integers(0, n, (resamples, n))
        t, own, up = tokens[r].sum(1), steps[0][r].sum(1), steps[1][r].sum(1)
        a = t[pick].sum(1) / own[pick].sum(1)
        g = a - t[pick].sum(1) / up[pick].sum(1)
        for i, (boots, theta) in enumerate(((a, true[0]), (g, true[0] - true[1]))):
            low, high = np.quantile(boots, [(1 - CONFIDENCE) / 2, (1 + CONFIDENCE) / 2])
            hits[i] += low <= theta <= high
    return hits[0] / replications, hits[1] / replications


if __name__ == "__main__":      # the coverage table of docs/probe.md: python -m tests.probe.test_interval_coverage
    print("| configs | held-out per config | acceptance | " + " | ".join(a for a, *_ in ARMS)
          + " | gain own − upstream | --no-curve: own, upstream, gain | former bootstrap: own, gain |")
    print("|---|---:|---|" + "---:|" * (len(ARMS) + 3))
    for configs in (1, CONFIGS):
        for prompts in (2, 3, 4, 6, 12):
            for scale, label in ((1.0, "1.1–1.3"), (4.0, "1.5–2.1")):
                got = coverage(configs, prompts, len(SEEDS), scale)
                two = coverage(configs, prompts, len(SEEDS), scale, arms=ARMS[:2])
                former = former_bootstrap(configs, prompts, len(SEEDS), scale)
                print(f"| {configs} | {prompts} | {label} | " + " | ".join(f"{v:.3f}" for v in got.values())
                      + f" | {two['own']:.3f}, {two['upstream']:.3f}, {two['gain own − upstream']:.3f}"
                      + f" | {former[0]:.3f}, {former[1]:.3f} |")
    apart = (ARMS[0][:2] + (0.20,), *(a[:2] + (0.04,) for a in ARMS[1:]))
    got = coverage(CONFIGS, HELD_OUT, len(SEEDS), arms=apart)
    print(f"\nown's seeds spreading 5x the other arms' ({CONFIGS} configs, {HELD_OUT} prompts each): "
          + ", ".join(f"{k} {v:.3f}" for k, v in got.items()))
