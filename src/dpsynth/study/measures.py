"""What a study measures on each synthetic table, against the confidential one.

* ``rmse``: root mean squared error of the strata rates, per 100,000.
* ``rank_correlation``: Spearman's rho between the synthetic and the true area rates
  (age-adjusted when the study has an age key): are the areas still ranked as they are?
* ``disparity:<name>``: each configured disparity, the rate of its numerator strata over
  that of its denominator strata (age-adjusted when the study has an age key).

:class:`Measures` scores many tables (rows) in one call.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from dpsynth.metrics import rmse_per_100k
from dpsynth.study.definition import StudyDefinition
from dpsynth.study.rates import GroupRates
from dpsynth.study.table import age_bands, filter_mask

AREA = "area:"


@dataclass(frozen=True)
class Measures:
    rates: GroupRates
    population: np.ndarray
    areas: tuple[str, ...]
    disparities: tuple[tuple[str, str, str], ...]  # (name, numerator group, denominator)

    def area_rates(self, counts) -> np.ndarray:
        """Rates per 100,000 of every area, shape (rows, areas)."""
        rates = np.atleast_2d(self.rates.rates(counts))
        return rates[:, : len(self.areas)]

    def values(self, counts, truth) -> pd.DataFrame:
        """One row per table of ``counts``: rmse, rank_correlation, disparity:<name>."""
        counts = np.atleast_2d(np.asarray(counts, dtype=float))
        out = {"rmse": rmse_per_100k(counts / self.population, truth / self.population)}
        rates = np.atleast_2d(self.rates.rates(counts))
        if self.areas:
            from scipy.stats import rankdata  # imported here: scipy.stats costs ~1 s per job

            ranks = rankdata(rates[:, : len(self.areas)], axis=1)
            true_ranks = rankdata(self.area_rates(truth)[0])
            ranks = ranks - ranks.mean(axis=1, keepdims=True)
            true_ranks = true_ranks - true_ranks.mean()
            with np.errstate(invalid="ignore", divide="ignore"):
                out["rank_correlation"] = (ranks @ true_ranks) / (
                    np.sqrt((ranks**2).sum(axis=1)) * np.sqrt((true_ranks**2).sum())
                )
        index = {name: k for k, name in enumerate(self.rates.names)}
        with np.errstate(invalid="ignore", divide="ignore"):
            for name, num, den in self.disparities:
                out[f"disparity:{name}"] = rates[:, index[num]] / rates[:, index[den]]
        return pd.DataFrame(out)


def study_measures(definition: StudyDefinition, strata: pd.DataFrame) -> Measures:
    """The measures of a study on its strata (with an age key, the standard population
    is read from ``definition.standard_population``)."""
    groups: dict[str, np.ndarray] = {}
    areas: tuple[str, ...] = ()
    if definition.area is not None:
        area = strata[definition.area].astype(str).to_numpy()
        areas = tuple(sorted(set(area)))
        for name in areas:
            groups[AREA + name] = area == name
    disparities = []
    for k, spec in enumerate(definition.disparities):
        key = f"studies.{definition.name}.disparities[{k}]"
        where = filter_mask(strata, spec.where, f"{key}.where")
        for side in ("numerator", "denominator"):
            groups[f"{spec.name}:{side}"] = (
                filter_mask(strata, getattr(spec, side), f"{key}.{side}") & where
            )
        disparities.append((spec.name, f"{spec.name}:numerator", f"{spec.name}:denominator"))
    groups["all"] = np.ones(len(strata), dtype=bool)
    population = strata[definition.population].to_numpy(dtype=float)
    options = {}
    if definition.population_keys != definition.keys:  # strata share their unit's population
        units = strata[list(definition.population_keys)].astype(str)
        options["unit"] = units.agg("|".join, axis=1).to_numpy()
    if definition.age is not None:
        from dpsynth.data.standard_population import load_standard_population, standard_weights

        standard = load_standard_population(definition.standard_population)
        options["weights"] = standard_weights(standard, age_bands(definition, strata))
        options["band"] = strata[definition.age].astype(str)
    rates = GroupRates(population, groups, **options)
    return Measures(rates, population, areas, tuple(disparities))
