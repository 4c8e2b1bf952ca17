"""`plan`'s Student-t quantiles, checked without the library that computes them: against printed tables, and by
integrating the t density up to the quantile (the probability below it must be the one asked for)."""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np
import pytest

from kimi_eagle_data.reports.intervals import t_quantile

# Printed Student-t tables (two-sided 95% and 99.9% columns), 3 decimals.
TABLE = {(0.975, 1): 12.706, (0.975, 2): 4.303, (0.975, 3): 3.182, (0.975, 4): 2.776, (0.975, 5): 2.571,
         (0.975, 30): 2.042, (0.9995, 3): 12.924, (0.9995, 10): 4.587}


@pytest.mark.parametrize(("p", "df"), sorted(TABLE))
def test_quantiles_match_printed_tables(p, df):
    assert round(t_quantile(p, df), 3) == TABLE[p, df]


def t_density(x: np.ndarray, df: float) -> np.ndarray:
    c = math.exp(math.lgamma((df + 1) / 2) - math.lgamma(df / 2)) / math.sqrt(df * math.pi)
    return c * (1 + x * x / df) ** (-(df + 1) / 2)


@pytest.mark.parametrize("df", [1.5, 2.5, 3.7, 19.2, 250.0])       # fractional: Welch-Satterthwaite's
@pytest.mark.parametrize("p", [0.9, 0.975, 0.9995])
def test_probability_below_the_quantile_is_p(p, df):
    q = t_quantile(p, df)
    x = np.linspace(0.0, q, 400_001)
    f = t_density(x, df)
    below = 0.5 + (x[1] - x[0]) / 3 * (f[0] + 4 * f[1:-1:2].sum() + 2 * f[2:-1:2].sum() + f[-1])   # Simpson
    assert below == pytest.approx(p, abs=1e-9)
    assert t_quantile(1 - p, df) == pytest.approx(-q, rel=1e-12)


def test_infinite_df_is_the_normal():
    assert t_quantile(0.975, math.inf) == pytest.approx(NormalDist().inv_cdf(0.975), rel=1e-12)
