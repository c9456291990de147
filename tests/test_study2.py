"""Study 2's tables: the urban rule, the scenario tables, and the stand-in; and the
study stage's measures on pennLC against a direct pandas computation."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import yaml
from workflow_helpers import REPO, filled_definition, schema_defaults

from dpcounts.data.pennsylvania import load_pennlc, load_pennsylvania_counties
from dpcounts.data.pennsylvania_standin import (
    CANCERS,
    STANDIN_AGE_GROUPS,
    StandinModel,
    expand_populations,
    standin_strata,
)
from dpcounts.data.standard_population import load_standard_population, standard_weights
from dpcounts.privacy.calibrate import calibrate
from dpcounts.studies.stage.measures import study_measures
from dpcounts.studies.stage.table import age_bands, load_study_table
from dpcounts.studies.study2.tables import county_urban, study_table


@pytest.fixture(scope="module")
def pennlc():
    return load_pennlc(REPO / "data/pennlc_strata.parquet")


@pytest.fixture(scope="module")
def standard():
    return load_standard_population(REPO / "data/us_standard_population_2000.csv")


@pytest.fixture(scope="module")
def counties():
    return load_pennsylvania_counties(REPO / "data/pennsylvania_counties.parquet")


# ---- urban rule -------------------------------------------------------------------------------
def test_urban_means_density_above_the_statewide_mean():
    strata = pd.DataFrame(
        {
            "county": ["a", "b", "c", "d"],
            "age": "young",
            "race": "w",
            "sex": "f",
            "population": [1000, 100, 500, 400],
            "cases": 0,
        }
    )
    counties = pd.DataFrame({"county": ["a", "b", "c", "d"], "land_area": [1.0, 10.0, 2.0, 3.0]})
    # statewide mean density 2000 / 16 = 125: a (1000), c (250) urban; b (10), d (133.3)...
    out = county_urban(strata, counties).set_index("county")
    assert out.loc["a", "urban"] and out.loc["c", "urban"] and out.loc["d", "urban"]
    assert not out.loc["b", "urban"]
    # a county exactly at the mean is not above it
    equal = pd.DataFrame({"county": ["a", "b"], "land_area": [1.0, 1.0]})
    flat = strata[strata["county"].isin(["a", "b"])].assign(population=[300, 300])
    assert not county_urban(flat, equal)["urban"].any()


def test_the_pennlc_table_flags_each_county_by_the_urban_rule(pennlc, counties, standard):
    table = study_table("pennlc", pennlc, counties, standard, np.random.default_rng(0))
    assert len(table) == len(pennlc)
    flags = table.groupby("county", observed=True)["urban"].agg(["min", "max"])
    assert (flags["min"] == flags["max"]).all()  # one flag per county
    density = table.groupby("county", observed=True)["population"].sum() / counties.set_index(
        "county")["land_area"]  # fmt: skip
    statewide = table["population"].sum() / counties["land_area"].sum()
    np.testing.assert_array_equal(flags["max"], (density > statewide).loc[flags.index])


@pytest.mark.slow
def test_pennlc_disparities_are_ratios_of_age_adjusted_rates_by_hand(
    tmp_path, pennlc, counties, standard
):
    """The study `pennlc` as config/config.yaml defines it, measured on the true counts,
    against direct age adjustment with pandas group sums."""
    table = study_table("pennlc", pennlc, counties, standard, np.random.default_rng(0))
    table.to_parquet(tmp_path / "table.parquet")
    entry = yaml.safe_load((REPO / "config/config.yaml").read_text())["studies"]["pennlc"]
    entry = {**entry, "table": str(tmp_path / "table.parquet"),
             "geometry": None, "map_epsilons": []}  # fmt: skip
    entry["age"] = {**entry["age"], "standard_population": str(REPO / entry["age"][
        "standard_population"])}  # fmt: skip
    definition = filled_definition("pennlc", entry)
    strata = load_study_table(definition)
    y = strata["cases"].to_numpy()
    values = study_measures(definition, strata).values(y, y).iloc[0]
    weights = standard_weights(standard, age_bands(definition, strata))

    def aar(rows):
        by_age = rows.groupby("age")[["cases", "population"]].sum()
        return float((weights * by_age["cases"] / by_age["population"]).sum())

    for spec in definition.disparities:
        where = np.ones(len(strata), dtype=bool)
        for column, wanted in spec.where.items():
            where &= strata[column].astype(str).isin(wanted).to_numpy()
        sides = []
        for side in (spec.numerator, spec.denominator):
            mask = where.copy()
            for column, wanted in side.items():
                mask &= strata[column].astype(str).isin(wanted).to_numpy()
            sides.append(aar(strata[mask]))
        assert values[f"disparity:{spec.name}"] == pytest.approx(sides[0] / sides[1],
                                                                 rel=1e-12), spec.name  # fmt: skip


def test_truncated_shapes_are_orders_of_magnitude_smaller_on_pennlc(pennlc):
    # Quick 2021 sec 3.2: the untruncated a grow with y., the truncated ones with E[y_i]
    strata = pennlc[pennlc["population"] > 0]
    total, population = int(strata["cases"].sum()), strata["population"].to_numpy(float)
    prior = np.full(len(strata), total / population.sum())
    untruncated = calibrate("pg", 1.0, total, population, prior, method="paper")
    truncated = calibrate("truncated", 1.0, total, population, prior, method="paper",
                          tail=1 / len(strata))  # fmt: skip
    assert untruncated.a.min() >= total / (np.e - 1.0) * (1 - 1e-12)
    assert truncated.a.max() * 100 < untruncated.a.min()


@pytest.mark.slow
def test_standin_has_the_papers_shape_and_total(pennlc, standard):
    counties = sorted(pennlc["county"].unique())
    urban = pd.Series([k % 3 == 0 for k in range(len(counties))], index=counties)
    total = schema_defaults()["study2"]["standin"]["total"]
    strata = standin_strata(pennlc, standard, urban, np.random.default_rng(1), StandinModel(total))
    assert len(strata) == 67 * 9 * 13 * 3 * 2 == 47_034
    assert strata["cases"].sum() == total
    assert (strata["population"] >= 1).all()
    assert set(strata["cancer"].astype(str)) == set(CANCERS)
    assert not strata.duplicated(["county", "cancer", "age", "race", "sex"]).any()


def test_standin_populations_keep_pennlcs_totals(pennlc, standard):
    pop = expand_populations(pennlc, standard)
    assert set(pop["age"]) == set(STANDIN_AGE_GROUPS)
    before = pennlc.groupby(["county", "sex"], observed=True)["population"].sum()
    after = pop.groupby(["county", "sex"])["population"].sum()
    # rounding (and the floor of one person) moves each of 39 cells by at most one person
    assert np.all(np.abs(after.loc[before.index].to_numpy() - before.to_numpy()) <= 39)
