"""A synthetic national table shaped like the deaths a health agency publishes.

County x age group (20) x race (4) x sex (2) x Hispanic origin (2): 3,142 counties give
1,005,440 strata and about 3 million deaths. ``national_table(ages=100, years=2)`` is the
national table of issue #36: single-year ages and two years, 10,054,400 strata (a ``year``
key before the others). Everything comes from one seed:

* county populations log-normal (median about 25,000 before scaling), scaled so that 3,142
  counties hold 330 million people; each county's population split by public-like shares
  of age, race, sex and origin, with gamma(20) noise per stratum (and per year);
* a national death rate per age, rising exponentially from 0.009% to 5%;
* deaths binomial in each stratum at that rate times a county effect (gamma(30)).

The prior rate column is the national rate of the stratum's age: public, as the national
life tables are.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

KEYS = ("county", "age", "race", "sex", "hispanic")
AGES, RACES, SEXES, ORIGINS = 20, 4, 2, 2


def national_arrays(
    counties: int = 3142, seed: int = 20261126, ages: int = AGES, years: int = 1
) -> dict[str, np.ndarray]:
    """The table's numbers without its keys: count, population and prior_rate per stratum,
    in the table's order ((year,) county, then age, race, sex and origin). The defaults
    give the table of issue #27 bit for bit."""
    out = [_year(counties, seed + year, ages) for year in range(years)]
    if years == 1:
        return out[0]
    return {name: np.concatenate([o[name] for o in out]) for name in out[0]}


def _year(counties: int, seed: int, ages: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    county_population = np.exp(rng.normal(np.log(25_000), 1.3, counties))
    county_population *= 330e6 / county_population.sum() * counties / 3142
    shares = np.einsum(
        "a,r,s,h->arsh",
        np.full(ages, 1.0 / ages),
        np.array([0.76, 0.13, 0.06, 0.05]),
        np.array([0.5, 0.5]),
        np.array([0.82, 0.18]),
    ).ravel()
    noise = rng.gamma(20.0, 1.0 / 20.0, (counties, shares.size))
    population = np.maximum(np.round(county_population[:, None] * shares * noise), 1.0)
    age_rate = 0.35 * 0.00025 * np.exp(np.linspace(0.0, np.log(600.0), ages))
    rate = np.repeat(age_rate, RACES * SEXES * ORIGINS)
    effect = rng.gamma(30.0, 1.0 / 30.0, counties)[:, None]
    count = rng.binomial(population.astype(np.int64), np.minimum(rate * effect, 1.0))
    return {
        "count": count.ravel(),
        "population": population.ravel().astype(np.int64),
        "prior_rate": np.tile(rate, counties),
    }


def keys_of(counties: int = 3142, ages: int = AGES, years: int = 1) -> tuple[str, ...]:
    """The key columns of ``national_table(counties, ages=ages, years=years)``."""
    return KEYS if years == 1 else ("year", *KEYS)


def national_table(
    counties: int = 3142, seed: int = 20261126, ages: int = AGES, years: int = 1
) -> pd.DataFrame:
    """The table (one row per stratum: keys, count, population, prior_rate)."""
    numbers = national_arrays(counties, seed, ages, years)
    shape = (years, counties, ages, RACES, SEXES, ORIGINS)
    index = np.indices(shape, dtype=np.int32).reshape(len(shape), -1)
    frame = pd.DataFrame()
    if years > 1:
        frame["year"] = pd.Categorical.from_codes(
            index[0], [str(2020 + y) for y in range(years)]
        ).astype(str)
    for i, key in enumerate(KEYS):
        labels = [str(v) for v in range(shape[i + 1])]
        if key == "county":
            labels = [str(c + 1001) for c in range(counties)]
        frame[key] = np.asarray(labels, dtype=object)[index[i + 1]]
    for column, values in numbers.items():
        frame[column] = values
    return frame
