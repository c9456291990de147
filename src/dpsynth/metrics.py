"""Utility measures of synthetic rates against the truth (Quick 2021 and Quick 2022, Section 3).

Rates are per person; the ``*_per_100k`` helpers scale by 100,000 as the papers report.
Every function takes draws as an array whose last axis is the cells, so one call scores
many datasets at once.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from dpsynth.units import PER_100K


def rmse_per_100k(rates, true_rate) -> np.ndarray:
    """sqrt(mean_i (lambda_i - lambda_true_i)^2) x 100,000, over the last axis."""
    diff = np.asarray(rates, dtype=float) - np.asarray(true_rate, dtype=float)
    return np.sqrt(np.mean(diff**2, axis=-1)) * PER_100K


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


def summarise(values, *, lower: float = 0.025, upper: float = 0.975) -> dict[str, float]:
    """Median and the central 95% band (quantiles ``lower`` and ``upper``) of a sample.

    NaN values (undefined ratios) are left out; all-NaN gives NaN.
    """
    values = np.asarray(values, dtype=float)
    values = values[~np.isnan(values)]
    if values.size == 0:
        return {"median": np.nan, "lower": np.nan, "upper": np.nan}
    lo, med, hi = np.quantile(values, [lower, 0.5, upper])
    return {"median": float(med), "lower": float(lo), "upper": float(hi)}


def summarise_frame(frame: pd.DataFrame, by: list[str], value: str = "value") -> pd.DataFrame:
    """Median and 95% band of ``value`` within each group of ``by`` (one row per group)."""
    rows = []
    for keys, group in frame.groupby(by, sort=True, dropna=False):
        keys = keys if isinstance(keys, tuple) else (keys,)
        rows.append({**dict(zip(by, keys, strict=True)), **summarise(group[value])})
    return pd.DataFrame(rows, columns=[*by, "median", "lower", "upper"])


def summarise_draws(frame: pd.DataFrame, by: Sequence[str], value_columns: Sequence[str]):
    """Median and 95% band (2.5%, 97.5% quantiles) of each value column within ``by``.

    Returns a long frame ``[*by, metric, median, lower, upper]``. Non-finite values (a ratio
    with an empty denominator) are kept: quantiles then follow numpy's handling of inf.
    """
    long = frame.melt(id_vars=list(by), value_vars=list(value_columns), var_name="metric")
    grouped = long.groupby([*by, "metric"], sort=True)["value"]
    out = grouped.quantile([0.5, 0.025, 0.975]).unstack()
    out.columns = ["median", "lower", "upper"]
    return out.reset_index()
