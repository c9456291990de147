"""Study 2's input tables (Quick 2022, Section 3), one per configured study:

* ``pennlc``: the real pennLC strata (county x race x sex x 4 age bands, 2002 lung-cancer
  cases). The one stratum with zero population (and zero cases) is structurally empty
  and public; the study stage leaves it out.
* ``standin``: the synthetic paper-scale stand-in of
  :mod:`dpcounts.data.pennsylvania_standin` (47,034 strata, y. = 26,116) with its modelled
  national rates as the prior.

Each table carries the county attribute ``urban``: a county density above the statewide
mean density (Quick 2022, Section 3.2), the attribute of the urban/rural disparities.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

#: Study 2's studies (config ``studies.pennlc``, ``studies.standin``).
STUDIES = ("pennlc", "standin")
#: Strata that share one population (the stand-in repeats it for every cancer type).
POPULATION_KEYS = ("county", "age", "race", "sex")


def unit_populations(strata: pd.DataFrame) -> pd.DataFrame:
    """One row per population unit (county x age x race x sex), with its population."""
    keys = [k for k in POPULATION_KEYS if k in strata.columns]
    return strata.drop_duplicates(keys)[[*keys, "population"]]


def county_urban(strata: pd.DataFrame, counties: pd.DataFrame) -> pd.DataFrame:
    """Per county: ``population``, ``land_area``, ``density`` and ``urban``.

    Urban means a density above the statewide mean density (total population over total
    land area), Quick 2021 sec 3.2's rule. ``counties`` needs ``county`` and ``land_area``.
    """
    for column in ("county", "land_area"):
        if column not in counties.columns:
            raise KeyError(f"counties frame needs a {column!r} column")
    populated = unit_populations(strata)
    pop = populated.groupby("county", observed=True)["population"].sum()
    area = counties.set_index("county")["land_area"].astype(float)
    missing = sorted(set(pop.index) - set(area.index))
    if missing:
        raise ValueError(f"counties without land area: {missing[:5]}")
    area = area.loc[pop.index]
    out = pd.DataFrame({"population": pop.astype(float), "land_area": area})
    out["density"] = out["population"] / out["land_area"]
    out["urban"] = out["density"] > out["population"].sum() / out["land_area"].sum()
    return out.rename_axis("county").reset_index()


def study_table(
    study: str,
    pennlc: pd.DataFrame,
    counties: pd.DataFrame,
    standard: pd.DataFrame,
    rng: np.random.Generator,
    *,
    standin_total: int | None = None,
) -> pd.DataFrame:
    """The input table of the Study 2 study ``study``, with each county's ``urban`` flag.

    ``rng`` draws the stand-in (unused for pennLC, which is real) and ``standin_total`` is
    its number of deaths (config ``study2.standin.total``).
    """
    if study not in STUDIES:
        raise ValueError(f"study must be one of {STUDIES}, got {study!r}")
    if study == "standin" and standin_total is None:
        raise ValueError("the stand-in needs standin_total (config study2.standin.total)")
    if study == "standin":
        from dpcounts.data.pennsylvania_standin import StandinModel, standin_strata

        urban = county_urban(pennlc, counties).set_index("county")["urban"]
        strata = standin_strata(pennlc, standard, urban, rng, StandinModel(total=standin_total))
    else:
        strata = pennlc.copy()
    urban = county_urban(strata, counties).set_index("county")["urban"]
    strata["urban"] = strata["county"].map(urban).astype(bool)
    return strata
