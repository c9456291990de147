"""A synthetic, paper-scale stand-in for Quick (2022)'s Pennsylvania cancer deaths (1980).

Quick (2022) (sec 3.1) analyses y. = 26,116 cancer deaths in 67 counties x 9 cancer types x
13 age groups x 3 races x 2 sexes = 47,034 strata, with national 1980 rates as the prior.
Those data are not available here, so this module *models* a dataset of the same shape
and total. Everything it returns is synthetic and must be labelled so.

Populations (expanded from pennLC's 2000 census populations):

* each pennLC age band (``Under.40``, ``40.59``, ``60.69``, ``70+``) is split into the
  5-year groups of the US 2000 standard population in proportion to that table, then
  regrouped into the paper's 13 groups (<1, 1-4, 5-9, ..., 25-34, 35-44, ..., 85+);
* pennLC's race ``o`` (other than white) is split into ``b`` (black) and ``o`` (other)
  with :data:`BLACK_SHARE_OF_NONWHITE` (an assumption);
* populations are rounded and floored at one person, so all 47,034 strata exist (the
  population is the same for every cancer type of a county x age x race x sex cell).

Rates (the documented model; :class:`StandinModel` holds every constant):

    national  lambda0[c, a, r, s] = k0 * share_c * exp(slope_c * (age_a - 65) / 10)
                                    * sex_c[s] * race_c[r]
    true      lambda[i, c, a, r, s] = lambda0 * state_c * state_race[c, r, s]
                                      * exp(u_i) * urban_effect^urban_i

with u_i ~ Normal(0, county_sd^2) per county, ``urban_i`` = county density above the
statewide mean, k0 fixed so the national rates predict ``national_share`` x y. deaths,
and the counts y ~ Multinomial(y., n * lambda / sum(n * lambda)) so that sum y = y.
exactly. ``state_race`` makes the state's race disparities differ from the nation's in
two places (digestive cancer among women, other lymphatic cancer among men), which is
what Quick (2022)'s Figure 6 illustrates.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from dpcounts.data.age_groups import age_bounds
from dpcounts.data.pennsylvania import PENNLC_AGE_BANDS

#: The paper's 13 age groups: label -> (first age, first age past; None = open).
STANDIN_AGE_GROUPS: dict[str, tuple[int, int | None]] = {
    label: age_bounds(label)
    for label in ("<1", "1-4", "5-9", "10-14", "15-19", "20-24", "25-34", "35-44", "45-54",
                  "55-64", "65-74", "75-84", "85+")
}  # fmt: skip
#: Quick (2022) Table 1's nine cancer types (ICD-9 ranges in the comments).
CANCERS = (
    "lip_oral",  # 140-149
    "digestive",  # 150-159
    "respiratory",  # 160-165
    "breast",  # 174-175
    "genital",  # 179-187
    "urinary",  # 188-189
    "other_sites",  # 170-173, 190-199
    "leukemia",  # 204-208
    "lymphatic",  # 200-203
)
STANDIN_RACES = ("w", "b", "o")
STANDIN_SEXES = ("f", "m")
#: Assumed share of black residents among pennLC's "other than white" population.
BLACK_SHARE_OF_NONWHITE = 0.85
#: Representative age of each group for the age curve (midpoint; 90 for 85+).
_AGE_MIDPOINT = {"<1": 0.5, "1-4": 3.0, "85+": 90.0}


def _age_mid(label: str) -> float:
    if label in _AGE_MIDPOINT:
        return _AGE_MIDPOINT[label]
    first, past = STANDIN_AGE_GROUPS[label]
    return (first + past) / 2.0


@dataclass(frozen=True)
class StandinModel:
    """Constants of the stand-in's rate model (module docstring). Not fitted to anything:
    chosen so the cancer mix, age gradient and race/sex patterns look like 1980 US
    mortality in broad strokes."""

    #: deaths in the table (config ``study2.standin.total``, the paper's 26,116).
    total: int
    #: share of the deaths the national rates predict (the state is a little above).
    national_share: float = 0.95
    #: per cancer: share of deaths, age slope per decade, sex factor (f, m).
    share: dict = field(
        default_factory=lambda: {
            "lip_oral": 0.02, "digestive": 0.27, "respiratory": 0.27, "breast": 0.08,
            "genital": 0.11, "urinary": 0.05, "other_sites": 0.11, "leukemia": 0.04,
            "lymphatic": 0.05,
        }
    )  # fmt: skip
    slope: dict = field(
        default_factory=lambda: {
            "lip_oral": 0.7, "digestive": 0.8, "respiratory": 0.8, "breast": 0.5,
            "genital": 0.8, "urinary": 0.9, "other_sites": 0.7, "leukemia": 0.45,
            "lymphatic": 0.55,
        }
    )  # fmt: skip
    sex: dict = field(
        default_factory=lambda: {
            "lip_oral": (0.5, 1.5), "digestive": (0.9, 1.1), "respiratory": (0.45, 1.55),
            "breast": (1.98, 0.02), "genital": (0.9, 1.1), "urinary": (0.6, 1.4),
            "other_sites": (1.0, 1.0), "leukemia": (0.8, 1.2), "lymphatic": (0.9, 1.1),
        }
    )  # fmt: skip
    #: national race factors (w, b, o) per cancer.
    race: dict = field(
        default_factory=lambda: {
            "lip_oral": (1.0, 1.3, 0.8), "digestive": (1.0, 1.35, 0.8),
            "respiratory": (1.0, 1.3, 0.6), "breast": (1.0, 1.05, 0.6),
            "genital": (1.0, 1.6, 0.6), "urinary": (1.0, 0.8, 0.6),
            "other_sites": (1.0, 1.2, 0.7), "leukemia": (1.0, 0.9, 0.7),
            "lymphatic": (1.0, 1.1, 0.7),
        }
    )  # fmt: skip
    #: state-over-national factor per cancer (the state's own cancer mix).
    state: dict = field(
        default_factory=lambda: {
            "lip_oral": 1.0, "digestive": 1.1, "respiratory": 0.95, "breast": 1.05,
            "genital": 1.0, "urinary": 1.1, "other_sites": 1.0, "leukemia": 1.0,
            "lymphatic": 1.05,
        }
    )  # fmt: skip
    #: state-only race deviations: (cancer, race, sex) -> factor on the true rate.
    state_race: dict = field(
        default_factory=lambda: {
            ("digestive", "b", "f"): 0.8,  # state disparity below the nation's
            ("lymphatic", "b", "m"): 0.7,  # state: white men higher; nation: black men
        }
    )
    county_sd: float = 0.1
    #: true urban/rural rate ratio (the national prior has none; Quick (2022) reports ~1.12).
    urban_effect: float = 1.12


def expand_populations(
    pennlc: pd.DataFrame, standard: pd.DataFrame, black_share: float = BLACK_SHARE_OF_NONWHITE
) -> pd.DataFrame:
    """County x age (13 groups) x race (w, b, o) x sex populations from pennLC's.

    ``standard`` is the US 2000 standard population table
    (:func:`dpcounts.data.standard_population.load_standard_population`). Returns columns
    ``county, age, race, sex, population`` (integers >= 1), one row per cell.
    """
    if not 0.0 < black_share < 1.0:
        raise ValueError(f"black_share must lie in (0, 1), got {black_share!r}")
    starts = standard["age_start"].to_numpy(dtype=int)
    std_pop = standard["population"].to_numpy(dtype=float)
    ends = np.append(starts[1:], 10**6)  # first age past each table group
    # share of each pennLC band that falls in each standard group
    band_share = {}
    for band, (first, past) in PENNLC_AGE_BANDS.items():
        inside = (starts >= first) & (starts < (past if past is not None else 10**6))
        band_share[band] = np.where(inside, std_pop, 0.0) / std_pop[inside].sum()
    # map standard groups to the 13 stand-in groups
    group_of = np.empty(starts.size, dtype=object)
    for label, (first, past) in STANDIN_AGE_GROUPS.items():
        past = past if past is not None else 10**6
        inside = (starts >= first) & (ends <= past)
        group_of[inside] = label
    if any(g is None for g in group_of):
        raise ValueError("the standard population's groups do not nest in the 13 age groups")
    rows = []
    pennlc = pennlc.assign(
        age=pennlc["age"].astype(str),
        race=pennlc["race"].astype(str),
        sex=pennlc["sex"].astype(str),
    )
    for (county, race, sex), cell in pennlc.groupby(["county", "race", "sex"], sort=True):
        fine = np.zeros(starts.size)
        for band, pop in zip(cell["age"], cell["population"], strict=True):
            fine += pop * band_share[band]
        by_group = pd.Series(fine).groupby(group_of).sum()
        races = {"w": 1.0} if race == "w" else {"b": black_share, "o": 1.0 - black_share}
        for new_race, share in races.items():
            for label in STANDIN_AGE_GROUPS:
                rows.append((county, label, new_race, sex, by_group[label] * share))
    frame = pd.DataFrame(rows, columns=["county", "age", "race", "sex", "population"])
    frame["population"] = np.maximum(np.rint(frame["population"]), 1).astype(np.int64)
    return frame


def national_rates(model: StandinModel, population: pd.DataFrame) -> pd.DataFrame:
    """The modelled national rates lambda0 per (cancer, age, race, sex), k0 solved so that
    they predict ``national_share * total`` deaths on ``population``."""
    rows = []
    for cancer in CANCERS:
        for age in STANDIN_AGE_GROUPS:
            curve = np.exp(model.slope[cancer] * (_age_mid(age) - 65.0) / 10.0)
            for r, race in enumerate(STANDIN_RACES):
                for s, sex in enumerate(STANDIN_SEXES):
                    rel = model.share[cancer] * curve * model.race[cancer][r] * model.sex[cancer][s]
                    rows.append((cancer, age, race, sex, rel))
    rates = pd.DataFrame(rows, columns=["cancer", "age", "race", "sex", "relative"])
    pop = population.groupby(["age", "race", "sex"])["population"].sum().rename("pop")
    joined = rates.join(pop, on=["age", "race", "sex"])
    k0 = model.national_share * model.total / float((joined["relative"] * joined["pop"]).sum())
    rates["national_rate"] = rates.pop("relative") * k0
    return rates


def standin_strata(
    pennlc: pd.DataFrame,
    standard: pd.DataFrame,
    urban: pd.Series,
    rng: np.random.Generator,
    model: StandinModel,
) -> pd.DataFrame:
    """The 47,034 synthetic strata: ``county, cancer, age, race, sex, population,
    national_rate, true_rate, cases`` (cases sum to ``model.total``).

    ``urban`` is a boolean Series indexed by county (the same rule the study uses);
    ``rng`` draws the county effects and the counts.
    """
    population = expand_populations(pennlc, standard)
    counties = sorted(population["county"].unique())
    missing = sorted(set(counties) - set(urban.index))
    if missing:
        raise ValueError(f"urban flag missing for counties {missing[:5]}")
    nat = national_rates(model, population)
    strata = population.merge(nat, on=["age", "race", "sex"], how="inner")
    county_effect = pd.Series(rng.normal(0.0, model.county_sd, len(counties)), index=counties)
    factor = strata["cancer"].map(model.state).to_numpy(dtype=float)
    for (cancer, race, sex), value in model.state_race.items():
        hit = (strata["cancer"] == cancer) & (strata["race"] == race) & (strata["sex"] == sex)
        factor = np.where(hit, factor * value, factor)
    factor *= np.exp(strata["county"].map(county_effect).to_numpy(dtype=float))
    factor *= np.where(strata["county"].map(urban).to_numpy(dtype=bool), model.urban_effect, 1.0)
    strata["true_rate"] = strata["national_rate"] * factor
    expected = strata["population"].to_numpy(float) * strata["true_rate"].to_numpy(float)
    strata["cases"] = rng.multinomial(model.total, expected / expected.sum()).astype(np.int64)
    order = {
        "cancer": list(CANCERS),
        "age": list(STANDIN_AGE_GROUPS),
        "race": list(STANDIN_RACES),
        "sex": list(STANDIN_SEXES),
    }
    for column, categories in order.items():
        strata[column] = pd.Categorical(
            strata[column], categories=categories, ordered=column == "age"
        )
    strata = strata.sort_values(["county", "cancer", "age", "race", "sex"]).reset_index(drop=True)
    return strata[
        ["county", "cancer", "age", "race", "sex", "population", "national_rate", "true_rate",
         "cases"]
    ]  # fmt: skip
