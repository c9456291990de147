"""The shipped pennLC strata and Pennsylvania county map."""

from pathlib import Path

import pytest

from dpcounts.data.counties import DataFileError
from dpcounts.data.pennsylvania import (
    PENNLC_AGE_BANDS,
    county_crude_rates,
    load_pennlc,
    load_pennsylvania_counties,
)

DATA = Path(__file__).resolve().parents[1] / "data"


@pytest.fixture(scope="module")
def strata():
    return load_pennlc(DATA / "pennlc_strata.parquet")


@pytest.fixture(scope="module")
def counties():
    return load_pennsylvania_counties(DATA / "pennsylvania_counties.parquet")


def test_strata_totals_match_pennlc_documentation(strata):
    # SpatialEpi's pennLC documentation: 67 counties x 2 races x 2 sexes x 4 age bands,
    # 10,279 cases in 2002; 2000 census population of Pennsylvania 12,281,054.
    assert len(strata) == 1072
    assert strata["cases"].sum() == 10279
    assert strata["population"].sum() == 12_281_054
    assert strata["county"].nunique() == 67
    assert list(strata["age"].cat.categories) == list(PENNLC_AGE_BANDS)
    assert strata.groupby(["county", "race", "sex"], observed=True).size().eq(4).all()


def test_county_map_matches_the_strata(strata, counties):
    assert len(counties) == 67
    assert set(counties["county"]) == set(strata["county"])
    assert counties["fips"].str.startswith("42").all()
    by_county = counties.set_index("county")
    assert by_county.loc["philadelphia", "fips"] == "42101"
    assert by_county.loc["allegheny", "fips"] == "42003"
    # Philadelphia County's land area is about 135 square miles.
    assert by_county.loc["philadelphia", "land_area"] == pytest.approx(135, rel=0.05)
    assert counties.crs.to_epsg() == 4326
    west, south, east, north = counties.total_bounds
    assert -81 < west < -80 and 39.5 < south < 40 and -75 < east < -74.5 and 42 < north < 42.5


def test_crude_rates_add_up(strata):
    rates = county_crude_rates(strata)
    assert rates["cases"].sum() == 10279
    row = rates.set_index("county").loc["adams"]
    assert row["rate"] == pytest.approx(row["cases"] / row["population"] * 1e5)


def test_load_pennlc_rejects_bad_files(strata, tmp_path):
    path = tmp_path / "strata.parquet"
    strata.assign(sex=strata["sex"].astype(str).replace("f", "female")).to_parquet(path)
    with pytest.raises(DataFileError, match="unknown labels"):
        load_pennlc(path)
    strata.assign(cases=strata["cases"] - 1).to_parquet(path)
    with pytest.raises(DataFileError, match="non-negative"):
        load_pennlc(path)
    strata.drop(columns="population").to_parquet(path)
    with pytest.raises(DataFileError, match=str(path)):
        load_pennlc(path)
