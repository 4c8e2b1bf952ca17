"""The probe's intervals: a t interval on the pooled ratio whose variance has a prompts part and a seeds part.

An arm's acceptance in a scope is the pooled ratio R = Σ tokens / Σ steps over its (held-out prompt, seed) cells.
Linearized, R − θ ≈ mean of z[p, s] = (tokens[p, s] − R · steps[p, s]) / mean steps, and the cells' z follow a
prompts × seeds layout with crossed effects: a prompt easier for every drafter, a drafter (training seed) better on
every prompt, and their interaction. The variance of the mean of z is (MS_prompts + MS_seeds) / (P · K), from the
two-way analysis of variance (it counts the interaction twice, and so errs wide); MS_prompts is taken within each
config, the configs of the pooled scope being strata that each contribute their own held-out prompts.

Two seeds give the seeds' part one degree of freedom, too few to tell a drafter's spread from chance, so the
seeds' part draws on every arm measured together: each arm's MS_seeds as a share of its (R − 1)² (a drafter's seed
moves its accepted drafts per step by a share of them), and every arm's seeds' part the largest of those shares
times its own (R − 1)², with the arms' seed degrees of freedom summed. Taking the largest, not the mean, keeps an
arm whose drafters spread more than the others' from being narrowed by them (on the K2.5 demo the upstream arm's
seeds spread 2.5 times the own arm's share). The interval
is R ± t · √variance, t at the Satterthwaite degrees of freedom of the two parts, at most the seeds' own where the
seeds' part is a quarter of the variance or more (an estimate from few degrees of freedom is too often small by
chance for the effective degrees of freedom to be trusted). The gain of two arms is the same interval on the difference of their z, paired by
prompt (both arms decode the same prompts), its seeds' part the two arms' parts added. An acceptance interval stops
at 1 (every verify step yields the target's own token). tests/probe/test_interval_coverage.py measures the coverage
by simulation; below COVERING_PROMPTS held-out prompts, or MIN_SEED_DF pooled seed degrees of freedom, a figure is
exploratory.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
from scipy.special import stdtrit

CONFIDENCE = 0.95
# The held-out prompts and pooled seed degrees of freedom at which the simulation measured these intervals covering
# (tests/probe/test_interval_coverage.py); below either a scope's figures are exploratory.
COVERING_PROMPTS = 4
MIN_SEED_DF = 2
FEW_PROMPTS = 4            # below this an interval is printed with a warning (its spread is barely estimated)
# Where the seeds' part is at least this share of the variance, t takes at most the seeds' degrees of freedom: a
# part estimated from few is too often small by chance for the Satterthwaite degrees of freedom to be trusted.
SEEDS_SHARE_CAPPED = 0.25
ACCEPTED_FLOOR = 0.05      # (R − 1) below this counts as this in the seeds' shares: acceptance near 1 would blow up
METHOD = ("t interval on the pooled ratio, its variance from a prompts × seeds analysis of variance of the "
          "linearized ratio (prompts within each config; the seeds' part the largest share of acceptance − 1 "
          "among the arms' seeds); gain: the same on the paired difference (same prompts)")


@dataclass
class Parts:
    """One arm's pooled ratio in one scope and the two parts of its variance (arrays over any leading axes)."""

    ratio: np.ndarray
    z: np.ndarray               # (..., prompts, seeds)
    ms_prompts: np.ndarray
    prompt_df: int
    ms_seeds: np.ndarray
    seed_df: int

    @property
    def share(self) -> np.ndarray:
        """MS_seeds as a share of (R − 1)²."""
        return self.ms_seeds / np.maximum(self.ratio - 1, ACCEPTED_FLOOR) ** 2


def _prompt_ms(z: np.ndarray, strata: Sequence[int]) -> tuple[np.ndarray, int]:
    strata = np.asarray(strata)
    groups = [np.flatnonzero(strata == g) for g in np.unique(strata)]
    per_prompt = z.mean(-1)
    within = sum(((per_prompt[..., g] - per_prompt[..., g].mean(-1, keepdims=True)) ** 2).sum(-1) for g in groups)
    df = z.shape[-2] - len(groups)
    return z.shape[-1] * within / max(df, 1), df


def parts(tokens: np.ndarray, steps: np.ndarray, strata: Sequence[int]) -> Parts:
    """The parts of cells `tokens`, `steps` shaped (..., prompts, seeds); `strata` the config index of each prompt."""
    tokens, steps = np.asarray(tokens, dtype=float), np.asarray(steps, dtype=float)
    prompts, seeds = steps.shape[-2], steps.shape[-1]
    total = np.maximum(steps.sum((-2, -1)), 1.0)
    ratio = tokens.sum((-2, -1)) / total
    z = (tokens - ratio[..., None, None] * steps) / (total / (prompts * seeds))[..., None, None]
    ms_prompts, prompt_df = _prompt_ms(z, strata)
    if seeds > 1:
        per_seed = z.mean(-2)
        ms_seeds = prompts * ((per_seed - per_seed.mean(-1, keepdims=True)) ** 2).sum(-1) / (seeds - 1)
    else:
        ms_seeds = np.zeros_like(ms_prompts)
    return Parts(ratio, z, ms_prompts, prompt_df, ms_seeds, seeds - 1)


def pooled_share(arms: Sequence[Parts]) -> tuple[np.ndarray, int]:
    """(the largest of `arms`' seeds' shares of (R − 1)², the arms' seed degrees of freedom summed)."""
    df = sum(a.seed_df for a in arms)
    if not df:
        return np.zeros_like(arms[0].ms_prompts), 0
    return np.max([a.share for a in arms], axis=0), df


def _interval(estimate, ms_prompts, prompt_df: int, ms_seeds, seed_df: int, cells: int, confidence: float):
    total = ms_prompts + ms_seeds
    denominator = ms_prompts ** 2 / max(prompt_df, 1) + (ms_seeds ** 2 / seed_df if seed_df else 0.0)
    df = np.where(denominator > 0, total ** 2 / np.where(denominator > 0, denominator, 1.0), max(prompt_df, 1))
    if seed_df:
        df = np.where(ms_seeds >= SEEDS_SHARE_CAPPED * total, np.minimum(df, seed_df), df)
    half = stdtrit(df, 1 - (1 - confidence) / 2) * np.sqrt(total / cells)
    return estimate - half, estimate + half, df


def _seeds_part(arm: Parts, share: np.ndarray) -> np.ndarray:
    """An arm's seeds' part: the pooled share (or its own, where it is given a smaller one) times its (R − 1)²."""
    return np.maximum(share, arm.share) * np.maximum(arm.ratio - 1, ACCEPTED_FLOOR) ** 2


def ratio_interval(arm: Parts, share: np.ndarray, seed_df: int, confidence: float = CONFIDENCE):
    """(estimate, low, high, degrees of freedom) of one arm's pooled ratio; `share`, `seed_df` from pooled_share."""
    low, high, df = _interval(arm.ratio, arm.ms_prompts, arm.prompt_df, _seeds_part(arm, share), seed_df,
                              arm.z.shape[-2] * arm.z.shape[-1], confidence)
    return arm.ratio, np.maximum(low, 1.0), high, df        # every verify step yields at least the target's token


def difference_interval(a: Parts, b: Parts, strata: Sequence[int], share: np.ndarray, seed_df: int,
                        confidence: float = CONFIDENCE):
    """(estimate, low, high, degrees of freedom) of ratio a − ratio b, paired by prompt."""
    ms_prompts, prompt_df = _prompt_ms(a.z - b.z, strata)
    seeds = _seeds_part(a, share) + _seeds_part(b, share)
    estimate = a.ratio - b.ratio
    return (estimate, *_interval(estimate, ms_prompts, prompt_df, seeds, seed_df, a.z.shape[-2] * a.z.shape[-1],
                                 confidence))


def seed_figures(tokens: np.ndarray, steps: np.ndarray, seeds: Sequence[int]) -> dict[str, Any]:
    """Each seed's pooled ratio over the cells (prompts, seeds) and their spread (max − min)."""
    per = np.asarray(tokens, float).sum(0) / np.maximum(np.asarray(steps, float).sum(0), 1.0)
    return {"per_seed": {str(s): round(float(a), 3) for s, a in zip(seeds, per)},
            "seed_spread": round(float(per.max() - per.min()), 3)}


def exploratory(prompts: int, seed_df: int) -> bool:
    """Whether a figure is over fewer held-out prompts, or fewer pooled seed degrees of freedom, than the simulation
    showed to cover."""
    return prompts < COVERING_PROMPTS or seed_df < MIN_SEED_DF
