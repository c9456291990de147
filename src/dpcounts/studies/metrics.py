"""Utility measures and their summaries (Quick 2021 and Quick 2022, Section 3).

The one module of the studies' shared summaries: the utility measures of synthetic rates
against the truth (rates are per person; the ``*_per_100k`` helpers scale by
:data:`dpcounts.units.PER_100K` as the papers report), the one median and 95% band over
the L draws (Study 1's datasets, a study's synthetic sets; :func:`summarise`,
:func:`summarise_frame`, columns :data:`BAND_COLUMNS`) and the mean over them from per-chunk
sums (:func:`pooled_mean`). Every measure takes draws as an array whose last axis is the
cells, so one call scores many draws at once.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from fractions import Fraction

import numpy as np
import pandas as pd

from dpcounts.units import PER_100K


def rmse_per_100k(rates, true_rate, per: float = PER_100K, cells: int | None = None) -> np.ndarray:
    """sqrt(mean_i (lambda_i - lambda_true_i)^2) x 100,000 (x ``per``), over the last axis;
    ``cells``: the mean is over that many cells, the ones not given equal to the truth."""
    diff = np.asarray(rates, dtype=float) - np.asarray(true_rate, dtype=float)
    np.square(diff, out=diff)  # diff**2 without a second temporary
    if cells is None:
        return np.sqrt(np.mean(diff, axis=-1)) * per
    return np.sqrt(np.sum(diff, axis=-1) / cells) * per


def group_rate_per_100k(rates, population, members) -> np.ndarray:
    """Rate of a group of cells: expected events over population, x 100,000.

    sum_{i in G} n_i lambda_i / sum_{i in G} n_i (the rate one would compute from the
    group's pooled counts).
    """
    members = np.asarray(members, dtype=bool)
    population = np.asarray(population, dtype=float)
    if not members.any():
        raise ValueError("the group has no cells")
    events = np.asarray(rates, dtype=float)[..., members] @ population[members]
    return events / population[members].sum() * PER_100K


#: Quantiles of the central 95% band over the L draws, beside their median
#: (the bands of Quick 2021 and Quick 2022, Section 3).
BAND = (0.025, 0.975)
#: The columns of every band: its median and quantiles ``BAND``, in this order.
BAND_COLUMNS = ("median", "lower", "upper")


def summarise(values, *, lower: float = BAND[0], upper: float = BAND[1]) -> dict[str, float]:
    """Median and the central 95% band (quantiles ``lower`` and ``upper``) of a sample.

    The one implementation of "median and band" (every summary of the studies and the
    pseudo-posterior tables goes through it): numpy's linear quantiles of the sample.
    NaN values (undefined ratios) are left out; all-NaN gives NaN. Infinite values (a
    ratio with an empty denominator) are kept and act as limits: a quantile between an
    order statistic and an infinite one is that infinity, between -inf and inf it is NaN
    (numpy's interpolation would give NaN for all of these).
    """
    values = np.asarray(values, dtype=float)
    values = values[~np.isnan(values)]
    if values.size == 0:
        return dict.fromkeys(BAND_COLUMNS, np.nan)
    quantiles = [lower, 0.5, upper]
    with np.errstate(invalid="ignore"):
        lo, med, hi = np.quantile(values, quantiles)
    if np.isnan([lo, med, hi]).any():  # only infinities make NaN here
        lo, med, hi = _with_infinities(values, quantiles)
    return {"median": float(med), "lower": float(lo), "upper": float(hi)}


def median_interval(values, level: float = 0.95) -> tuple[float, float]:
    """A distribution-free confidence interval of the median of the law ``values`` were
    drawn from: the order statistics (j, n + 1 - j) of the sorted sample, j the largest
    with 2 P(Binomial(n, 1/2) <= j - 1) <= 1 - level, so that the interval covers the
    median with probability at least ``level`` whatever the law. Below 6 values no such j
    exists and the interval is (min, max) (coverage 1 - 2^(1 - n)). NaN values are left
    out; none left gives (NaN, NaN)."""
    values = np.sort(np.asarray(values, dtype=float))
    values = values[~np.isnan(values)]
    n = values.size
    if n == 0:
        return float("nan"), float("nan")
    j = max(_binomial_half_quantile((1 - level) / 2, n), 1)  # P(B <= j - 1) < (1 - level) / 2
    return float(values[j - 1]), float(values[n - j])


@functools.lru_cache(maxsize=256)
def _binomial_half_quantile(q: float, n: int) -> int:
    """The q-quantile of Binomial(n, 1/2), 0 < q < 1: the smallest k with
    P(B <= k) >= q, in exact integers (the cdf is sum_{i <= k} C(n, i) / 2^n, ``q`` taken
    at its exact binary value), what ``scipy.stats.binom.ppf(q, n, 0.5)`` computes in
    floating point (tests/test_metrics.py compares them), without importing scipy.stats
    (about a second of a summary job), once per sample size (a study's groups share it)."""
    if not 0.0 < q < 1.0:
        raise ValueError(f"q must lie strictly between 0 and 1, got {q!r}")
    numerator, denominator = Fraction(q).as_integer_ratio()
    target = numerator << n  # P(B <= k) >= q  <=>  sum C(n, i) * denominator >= target
    below, term = 0, 1  # sum_{i < k} C(n, i), and C(n, k)
    for k in range(n + 1):
        below += term
        if below * denominator >= target:
            return k
        term = term * (n - k) // (k + 1)
    return n


def _with_infinities(values: np.ndarray, quantiles) -> list[float]:
    """Linear quantiles of a sample holding infinities: the infinite end of the two order
    statistics around a quantile wins; both equal gives that value; -inf and inf, NaN."""
    below = np.quantile(values, quantiles, method="lower")
    above = np.quantile(values, quantiles, method="higher")
    with np.errstate(invalid="ignore"):
        linear = np.quantile(values, quantiles)
    out = []
    for lo, hi, value in zip(below, above, linear, strict=True):
        if lo == hi:
            value = lo
        elif np.isinf(lo) and np.isinf(hi):
            value = np.nan
        elif np.isinf(lo):
            value = lo
        elif np.isinf(hi):
            value = hi
        out.append(float(value))
    return out


def summarise_frame(frame: pd.DataFrame, by: Sequence[str], value: str = "value") -> pd.DataFrame:
    """:func:`summarise` of ``value`` within each group of ``by``: one row per group, sorted
    by ``by`` (a NaN key is a group of its own), columns ``[*by, *BAND_COLUMNS]``.

    Every group at once: the values are sorted within their groups (one sort) and each
    quantile is numpy's linear interpolation, by numpy's own operations on the same two
    order statistics, so each number is the one :func:`summarise` gives (a group whose
    sample holds infinities is summarised by :func:`summarise` itself)."""
    by = list(by)
    grouped = frame.groupby(by, sort=True, dropna=False)
    group = grouped.ngroup().to_numpy()  # the group's rank in the sorted keys
    keys = grouped.size().index
    n_groups = len(keys)
    values = frame[value].to_numpy(dtype=float)
    kept = ~np.isnan(values)
    group, values = group[kept], values[kept]
    order = np.lexsort((values, group))
    group, values = group[order], values[order]
    count = np.bincount(group, minlength=n_groups)
    start = np.cumsum(count) - count
    bands = np.full((n_groups, len(BAND_COLUMNS)), np.nan)
    filled = count > 0
    n, first = count[filled], start[filled]
    for column, q in zip(BAND_COLUMNS, (0.5, *BAND), strict=True):
        # numpy's linear method: virtual index (n - 1) q, its floor and the next order
        # statistic (both the last one from n - 1 on, where gamma = index + 1), then _lerp
        virtual = (n - 1) * np.float64(q)
        above = virtual >= n - 1
        previous = np.floor(virtual).astype(np.intp)
        previous[above] = -1
        nxt = previous + 1
        nxt[above] = -1
        gamma = virtual - previous
        last = first + n - 1
        a = values[np.where(above, last, first + previous)]
        b = values[np.where(above, last, first + nxt)]
        with np.errstate(invalid="ignore"):  # infinities: NaN here, summarised below
            difference = b - a
            result = a + difference * gamma
            upper = gamma >= 0.5
            result[upper] = (b - difference * (1 - gamma))[upper]
        bands[filled, BAND_COLUMNS.index(column)] = result
    with_infinities = np.isnan(bands).any(axis=1) & filled
    for row in with_infinities.nonzero()[0]:  # rare: infinite ratios act as limits
        sample = values[start[row] : start[row] + count[row]]
        bands[row] = [summarise(sample)[column] for column in BAND_COLUMNS]
    out = pd.DataFrame(list(keys) if len(by) > 1 else [(key,) for key in keys], columns=by)
    for k, column in enumerate(BAND_COLUMNS):
        out[column] = bands[:, k]
    return out


def pooled_mean(
    sums: pd.DataFrame, by: Sequence[str], total: str, count: str, name: str = "rate"
) -> pd.DataFrame:
    """Mean over the draws from per-chunk sums: within each group of ``by`` (sorted), the
    sum of ``total`` over the sum of ``count``, as column ``name`` (``[*by, name]``)."""
    totals = sums.groupby(list(by), sort=True)[[total, count]].sum()
    return (totals[total] / totals[count]).rename(name).reset_index()
