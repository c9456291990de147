"""Prior rates of a study's strata, and what they cost.

* ``overall``: y. / sum(n) in every stratum. The total is public under the neighbouring
  relation of every release (one event moved between strata), so this costs nothing.
* ``sanitised``: group totals with discrete Laplace noise (sensitivity 2, budget
  ``prior.epsilon``) turned into rates, exactly as ``dpcounts synthesize
  --sanitised-prior-by`` releases them (:func:`dpcounts.privacy.sanitised_prior.
  sanitised_group_prior`); the release then costs prior.epsilon + epsilon.
* ``file`` / ``column``: rates the analyst declares public (costs nothing *only* if they
  really are public: a rate computed from the confidential counts is not).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from dpcounts.studies.stage.definition import StudyDefinition
from dpcounts.studies.stage.table import StudyDataError


def _from_file(definition: StudyDefinition, strata: pd.DataFrame) -> np.ndarray:
    from dpcounts.data.validation import describe_duplicates, read_table

    prior, keys = definition.prior, list(definition.keys)
    where = f"config key studies.{definition.name}.prior.path"
    if not prior.path.is_file():
        raise StudyDataError(f"{where}: {prior.path} not found")
    table = read_table(prior.path)
    missing = [c for c in [*keys, prior.column] if c not in table.columns]
    if missing:
        raise StudyDataError(f"{where}: {prior.path} has no column(s) {missing}; "
                             f"columns are {list(table.columns)}")  # fmt: skip
    table = table[[*keys, prior.column]].astype({k: str for k in keys})
    if table.duplicated(keys).any():
        raise StudyDataError(f"{where}: {prior.path} has duplicate key(s) "
                             f"{describe_duplicates(table, keys)}; expected one rate "
                             "per stratum")  # fmt: skip
    joined = strata[keys].merge(table, on=keys, how="left", validate="one_to_one")
    return pd.to_numeric(joined[prior.column], errors="coerce").to_numpy(dtype=float)


def prior_rates(
    definition: StudyDefinition, strata: pd.DataFrame, rng: np.random.Generator
) -> tuple[np.ndarray, float]:
    """Per-stratum prior rates (per person) and the budget they spent (0 when public)."""
    counts = strata[definition.count].to_numpy()
    population = strata[definition.population].to_numpy(dtype=float)
    prior = definition.prior
    if prior.source == "overall":
        return np.full(len(strata), counts.sum() / population.sum()), 0.0
    if prior.source == "sanitised":
        from dpcounts.privacy.sanitised_prior import sanitised_group_prior

        groups = strata[list(prior.by)].astype(str).agg("|".join, axis=1).to_numpy()
        released = sanitised_group_prior(counts, groups, population, prior.epsilon, rng)
        return np.array(released.rates), released.epsilon
    if prior.source == "file":
        rates = _from_file(definition, strata)
    else:
        rates = pd.to_numeric(strata[prior.column], errors="coerce").to_numpy(dtype=float)
    bad = ~np.isfinite(rates) | (rates <= 0)
    if bad.any():
        first = strata.loc[bad, list(definition.keys)].iloc[0].to_dict()
        raise StudyDataError(
            f"config key studies.{definition.name}.prior: {int(bad.sum())} stratum/strata "
            f"without a prior rate > 0 (first: {first}); expected a positive rate for each"
        )
    return rates, 0.0
