"""Synthetic data from a fitted synthesizer (posterior predictive) and their utility.

A synthetic data set has as many records as the data: pick one posterior draw theta_s and
draw every record from p(. | theta_s). Utility is judged as in Hu et al. (2020), Section 3: the 15th
and 90th percentiles, mean and median of each synthetic data set against the data's.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

import numpy as np
import pandas as pd

from dpcounts.studies.pseudo_posterior.likelihood import sample_records
from dpcounts.studies.pseudo_posterior.names import DATA
from dpcounts.studies.pseudo_posterior.posterior import PosteriorFit

STATISTICS = ("q15", "q90", "mean", "median")

logger = logging.getLogger(__name__)


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


def synthetic_tables(
    fits: Mapping[str, PosteriorFit], count: int, rng: np.random.Generator
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``count`` synthetic data sets of every fit (in the order of ``fits``, all drawing
    from ``rng``) and the utility statistics of each, with the data's first.

    Returns ``(utility, synthetic)``: ``utility`` has one row per synthesizer and
    replicate (the data: :data:`DATA`, replicate 0) with :data:`STATISTICS`; ``synthetic``
    has ``synthesizer, record, value`` for the data and each synthesizer's first
    synthetic data set. The fits share their data ``y``.
    """
    if not fits:
        raise ValueError("synthetic_tables needs at least one fit; got none")
    y = next(iter(fits.values())).y
    records = np.arange(y.size)
    utility = [utility_statistics(y).assign(synthesizer=DATA, replicate=0)]
    synthetic = [pd.DataFrame({"synthesizer": DATA, "record": records, "value": y})]
    for name, fit in fits.items():
        sets = synthetic_datasets(fit, count, rng)
        utility.append(
            utility_statistics(sets).assign(synthesizer=name, replicate=range(len(sets)))
        )
        synthetic.append(pd.DataFrame({"synthesizer": name, "record": records, "value": sets[0]}))
        logger.info("%s: %d synthetic data sets", name, len(sets))
    return pd.concat(utility, ignore_index=True), pd.concat(synthetic, ignore_index=True)
