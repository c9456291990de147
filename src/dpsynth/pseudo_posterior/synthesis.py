"""Synthetic data from a fitted synthesizer (posterior predictive) and their utility.

A synthetic data set has as many records as the data: pick one posterior draw theta_s and
draw every record from p(. | theta_s). Utility is judged as in Hu et al. (2020), Section 3: the 15th
and 90th percentiles, mean and median of each synthetic data set against the data's.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from dpsynth.pseudo_posterior.likelihood import sample_records
from dpsynth.pseudo_posterior.posterior import PosteriorFit

STATISTICS = ("q15", "q90", "mean", "median")


def synthetic_datasets(fit: PosteriorFit, count: int, rng: np.random.Generator) -> np.ndarray:
    """``count`` synthetic data sets, each from a distinct posterior draw: (count, n)."""
    n_draws = fit.draws["mu"].size
    if not isinstance(count, (int, np.integer)) or not 1 <= count <= n_draws:
        raise ValueError(f"synthetic_datasets must be an integer in [1, {n_draws}], got {count!r}")
    index = np.sort(rng.choice(n_draws, size=count, replace=False))
    return sample_records(fit.draws, index, fit.y.size, fit.family, rng)


def utility_statistics(datasets: np.ndarray) -> pd.DataFrame:
    """One row per data set (rows of ``datasets``): its q15, q90, mean and median."""
    datasets = np.atleast_2d(np.asarray(datasets, dtype=float))
    return pd.DataFrame(
        {
            "q15": np.quantile(datasets, 0.15, axis=1),
            "q90": np.quantile(datasets, 0.90, axis=1),
            "mean": datasets.mean(axis=1),
            "median": np.median(datasets, axis=1),
        }
    )
