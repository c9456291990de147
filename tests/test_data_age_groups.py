"""The modelled county age groups: the model's pieces and the shipped file."""

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpcounts.data.age_groups import (
    AGE_GROUPS,
    age_bounds,
    age_group_wide,
    aggregate_age_groups,
    group_edges,
    group_population,
    grouped_median,
    load_age_groups,
    model_county_age_counts,
    rake,
    solve_tilt,
    tilted_shares,
)
from dpcounts.data.counties import DataFileError, load_counties

DATA = Path(__file__).resolve().parents[1] / "data"
AGES = DATA / "county_age_groups_1980.parquet"

# National 1980 population by 5-year group (both sexes), vega-datasets population.json,
# typed here independently of the builder so the test can catch a wrong aggregation.
NATIONAL_1980 = pd.DataFrame(
    {
        "age_start": np.arange(0, 95, 5),
        "population": [
            16521220, 16956611, 18500821, 21109127, 21101723, 19451956, 17661060,
            13986308, 11646058, 11040012, 11713826, 11645327, 10153025, 8790457,
            6821215, 4792197, 2932178, 1495453, 703194,
        ],
    }
)  # fmt: skip


def national_group_total(first, past):
    ages = NATIONAL_1980["age_start"]
    rows = (ages >= first) & (ages < past if past is not None else True)
    return NATIONAL_1980.loc[rows, "population"].sum()


@pytest.fixture(scope="module")
def shipped():
    return load_age_groups(AGES)


def test_grouped_median_of_a_uniform_distribution_is_the_middle():
    lower, upper = group_edges([0, 10, 20, 30])  # last group 30-39
    assert grouped_median([1, 1, 1, 1], lower, upper) == pytest.approx(20.0)
    assert grouped_median([0, 0, 2, 0], lower, upper) == pytest.approx(25.0)


@settings(max_examples=40, deadline=None)
@given(median=st.floats(min_value=18.0, max_value=60.0))
def test_solved_tilt_reproduces_the_median(median):
    shares = NATIONAL_1980["population"].to_numpy(float)
    shares /= shares.sum()
    lower, upper = group_edges(NATIONAL_1980["age_start"])
    theta = solve_tilt(shares, lower, upper, median)
    tilted = tilted_shares(shares, lower, upper, theta)
    assert tilted.sum() == pytest.approx(1.0)
    assert grouped_median(tilted, lower, upper) == pytest.approx(median, abs=1e-6)


def test_tilt_zero_is_the_national_distribution():
    shares = NATIONAL_1980["population"].to_numpy(float)
    lower, upper = group_edges(NATIONAL_1980["age_start"])
    np.testing.assert_allclose(tilted_shares(shares / shares.sum(), lower, upper, 0.0),
                               shares / shares.sum())  # fmt: skip


@settings(max_examples=30, deadline=None)
@given(
    table=st.lists(st.lists(st.floats(0.1, 100.0), min_size=3, max_size=3), min_size=2, max_size=6),
    column_shares=st.lists(st.floats(0.1, 1.0), min_size=3, max_size=3),
)
def test_rake_meets_both_margins(table, column_shares):
    table = np.array(table)
    rows = table.sum(axis=1) * np.linspace(0.5, 2.0, len(table))
    columns = np.array(column_shares) / sum(column_shares) * rows.sum()
    raked = rake(table, rows, columns)
    np.testing.assert_allclose(raked.sum(axis=1), rows, rtol=1e-8)
    np.testing.assert_allclose(raked.sum(axis=0), columns, rtol=1e-8)


def test_model_keeps_county_totals_and_national_shares():
    populations = np.array([1_000.0, 50_000.0, 2_000_000.0])
    medians = [22.0, 30.0, 45.0]
    table = model_county_age_counts(NATIONAL_1980, populations, medians)
    np.testing.assert_allclose(table.sum(axis=1), populations, rtol=1e-8)
    national_shares = NATIONAL_1980["population"] / NATIONAL_1980["population"].sum()
    np.testing.assert_allclose(table.sum(axis=0), national_shares * populations.sum(), rtol=1e-8)
    # An older county has a larger share aged 65+ than a younger one.
    old = aggregate_age_groups(table, NATIONAL_1980["age_start"], {"65+": (65, None)})["65+"]
    assert old[2] / populations[2] > old[0] / populations[0]


def test_aggregate_rejects_groups_off_the_5_year_edges():
    with pytest.raises(ValueError, match="5-year edges"):
        aggregate_age_groups(np.ones((1, 19)), NATIONAL_1980["age_start"], {"x": (33, 44)})


def test_shipped_file_has_every_county_and_group(shipped):
    counties = load_counties(DATA / "counties_1980.parquet")
    assert set(shipped["age_group"]) == set(AGE_GROUPS)
    assert len(shipped) == len(counties) * len(AGE_GROUPS)
    assert set(shipped["fips"]) == set(counties["fips"])


@pytest.mark.parametrize("group", list(AGE_GROUPS))
def test_county_groups_sum_to_the_national_group_total_within_one_percent(shipped, group):
    modelled = shipped.loc[shipped["age_group"] == group, "population_modelled"].sum()
    national = national_group_total(*AGE_GROUPS[group])
    assert modelled == pytest.approx(national, rel=0.01)


def test_35_plus_is_the_sum_of_the_older_groups_and_below_the_county_total(shipped):
    wide = age_group_wide(shipped)
    parts = wide[["35-44", "45-54", "55-64", "65-74", "75-84", "85+"]].sum(axis=1)
    np.testing.assert_allclose(wide["35+"], parts, atol=0.05)
    counties = load_counties(DATA / "counties_1980.parquet").set_index("fips")
    assert (wide["35+"] <= counties.loc[wide.index, "population"] + 0.01).all()


def test_older_counties_have_older_modelled_populations(shipped):
    wide = age_group_wide(shipped)
    counties = load_counties(DATA / "counties_1980.parquet").set_index("fips")
    share_65 = (wide["65-74"] + wide["75-84"] + wide["85+"]) / counties["population"]
    rho = np.corrcoef(share_65.rank(), counties.loc[wide.index, "median_age"].rank())[0, 1]
    assert rho > 0.8


def test_load_age_groups_rejects_bad_files(shipped, tmp_path):
    path = tmp_path / "ages.parquet"
    shipped.head(3).assign(age_group="0-4").to_parquet(path)
    with pytest.raises(DataFileError, match="unknown age_group"):
        load_age_groups(path)
    shipped.head(3).assign(population_modelled=-1.0).to_parquet(path)
    with pytest.raises(DataFileError, match="non-negative"):
        load_age_groups(path)
    pd.concat([shipped.head(2), shipped.head(1)]).to_parquet(path)
    with pytest.raises(DataFileError, match="duplicate"):
        load_age_groups(path)


def test_group_population_selects_one_group_in_the_requested_order(shipped):
    wide = age_group_wide(shipped)
    some = list(wide.index[[5, 0, 3]])
    picked = group_population(shipped, "45-54", some)
    assert list(picked.index) == some
    np.testing.assert_array_equal(picked.to_numpy(), wide.loc[some, "45-54"].to_numpy())
    assert len(group_population(shipped, "85+")) == len(wide)
    with pytest.raises(ValueError, match="unknown age group"):
        group_population(shipped, "40-49")
    with pytest.raises(KeyError):
        group_population(shipped, "35-44", ["99999"])


def test_age_labels_read_as_their_bounds():
    assert age_bounds("<1") == (0, 1)
    assert age_bounds("1-4") == (1, 5)
    assert age_bounds("35-44") == (35, 45)
    assert age_bounds("85+") == (85, None)
    for label in ("35", "35-", "+85", "35 to 44"):
        with pytest.raises(ValueError, match=re.escape(f"age group '{label}'")):
            age_bounds(label)
