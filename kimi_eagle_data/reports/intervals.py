"""The plan's confidence intervals: Student-t on a mean, Wilson on a proportion, a ratio over clusters
(delta method), and Welch-Satterthwaite for a sum of independent estimates (reports/plan.py projects with them)."""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np
from scipy.special import stdtrit


def t_quantile(p: float, df: float) -> float:
    """Student-t p-quantile, exact (scipy's `stdtrit`), for real df > 0: the Welch-Satterthwaite degrees of
    freedom of the overall interval are fractional; a series approximation is too narrow at small df."""
    return float(stdtrit(df, p))


def mean_interval(values: np.ndarray, confidence: float) -> tuple[float, float, float, int]:
    """(mean, half-width of the t-interval, variance of the mean, df). One value: no interval (inf)."""
    v = np.asarray(values, dtype=np.float64)
    n = v.size
    mean = float(v.mean())
    if n < 2:
        return mean, math.inf, math.inf, 0
    var_mean = float(v.var(ddof=1)) / n
    return mean, t_quantile(0.5 + confidence / 2, n - 1) * math.sqrt(var_mean), var_mean, n - 1


def wilson(k: int, n: int, confidence: float) -> tuple[float, float, float]:
    """Proportion k/n with its Wilson score interval."""
    if n == 0:
        return math.nan, 0.0, 1.0
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    p = k / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    hw = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return p, max(0.0, centre - hw), min(1.0, centre + hw)


def welch(terms: list[tuple[float, float, float]], level: float) -> dict[str, float | None]:
    """The sum of independent estimates [(estimate, variance, df)] with its t-interval at quantile `level`,
    Welch-Satterthwaite degrees of freedom (df inf: a variance taken as known)."""
    est = sum(e for e, _, _ in terms)
    var = sum(v for _, v, _ in terms)
    if not math.isfinite(var):
        return interval_fields(est, -math.inf, math.inf)
    denom = sum(v * v / d for _, v, d in terms if d > 0 and v > 0)
    df = (var * var / denom) if denom else math.inf
    hw = t_quantile(level, df) * math.sqrt(var)
    return interval_fields(est, est - hw, est + hw)


def ratio_interval(num: np.ndarray, den: np.ndarray, confidence: float) -> tuple[float, float, float]:
    """sum(num) / sum(den) over clusters (conversations) with its delta-method t-interval, clipped to [0, 1]:
    the valid rate of turns that come in conversations."""
    num, den = np.asarray(num, dtype=np.float64), np.asarray(den, dtype=np.float64)
    r = float(num.sum() / den.sum())
    if num.size < 2:
        return r, 0.0, 1.0
    se = math.sqrt(float((num - r * den).var(ddof=1)) / num.size) / float(den.mean())
    hw = t_quantile(0.5 + confidence / 2, num.size - 1) * se
    return r, max(0.0, r - hw), min(1.0, r + hw)


def interval_fields(estimate: float, low: float, high: float) -> dict[str, float | None]:
    """An interval as the plan's JSON writes it: rounded, a negative low clipped to 0, an infinite bound None."""
    def r(x):
        return None if x is None or not math.isfinite(x) else round(float(x), 3)
    return {"estimate": r(estimate), "low": r(max(0.0, low)) if math.isfinite(low) else None, "high": r(high)}

