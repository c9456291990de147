"""The shipped 1980 county frame, its queen adjacency, and the loaders' validation."""

from pathlib import Path

import geopandas as gpd
import numpy as np
import pandas as pd
import pytest

from dpcounts.data.counties import (
    COUNTY_COLUMNS,
    DataFileError,
    load_counties,
    load_county_table,
    load_queen_edges,
    queen_adjacency,
)

DATA = Path(__file__).resolve().parents[1] / "data"
COUNTIES = DATA / "counties_1980.parquet"
QUEEN = DATA / "counties_1980_queen.csv"


@pytest.fixture(scope="module")
def counties():
    return load_counties(COUNTIES)


@pytest.fixture(scope="module")
def edges():
    return load_queen_edges(QUEEN)


def test_frame_has_the_nat_units_of_the_contiguous_us(counties):
    assert len(counties) == 3085  # NCOVR NAT's README: n=3085
    assert counties["fips"].is_unique
    assert counties["state"].nunique() == 49  # 48 contiguous states and DC
    assert not counties["state"].isin(["AK", "HI"]).any()
    assert (counties["fips"].str[:2] == counties["state_fips"]).all()


def test_known_counties_have_their_1980_census_values(counties):
    by_fips = counties.set_index("fips")
    # 1980 census: Los Angeles County 7,477,503 people on about 4,070 square miles of land;
    # Cook County, Illinois 5,253,655.
    assert by_fips.loc["06037", "population"] == 7_477_503
    assert by_fips.loc["06037", "land_area"] == pytest.approx(4070, rel=0.01)
    assert by_fips.loc["17031", "population"] == 5_253_655
    assert by_fips.loc["06037", "state"] == "CA"


def test_geometry_is_a_recognisable_contiguous_us(counties):
    assert counties.crs is not None and counties.crs.to_epsg() == 4326
    west, south, east, north = counties.total_bounds
    assert -125.5 < west < -124 and 24 < south < 25.5 and -67.5 < east < -66.5
    assert 49 < north < 49.5
    assert counties.geometry.is_valid.all()
    # Equal-area land area of the map vs the census land area: same order everywhere.
    area_sq_mi = counties.to_crs(5070).area / 2_589_988.11
    ratio = area_sq_mi / counties["land_area"]
    assert np.median(ratio) == pytest.approx(1.0, abs=0.1)


def test_queen_edges_are_unique_symmetric_and_within_the_frame(counties, edges):
    assert (edges["fips_a"] < edges["fips_b"]).all()
    assert not edges.duplicated().any()
    matrix = queen_adjacency(edges, counties["fips"])
    assert matrix.shape == (3085, 3085)
    assert (matrix != matrix.T).nnz == 0
    assert matrix.diagonal().sum() == 0
    assert matrix.nnz == 2 * len(edges)


def test_queen_edges_match_the_shipped_boundaries(counties, edges):
    # Neighbours from the GAL file must touch on the map: spot-check by geometry.
    geo = counties.set_index("fips").geometry
    sample = edges.sample(200, random_state=np.random.default_rng(1).integers(2**31))
    for a, b in sample.itertuples(index=False):
        assert geo[a].intersects(geo[b])


def test_adjacency_follows_the_order_of_the_given_fips(edges):
    fips = ["06037", "06059", "06111"]  # Los Angeles, Orange, Ventura: LA touches both
    subset = edges[edges["fips_a"].isin(fips) & edges["fips_b"].isin(fips)]
    matrix = queen_adjacency(subset, fips).toarray()
    assert matrix[0, 1] == 1 and matrix[0, 2] == 1 and matrix[1, 2] == 0
    reversed_matrix = queen_adjacency(subset, fips[::-1]).toarray()
    assert reversed_matrix[2, 1] == 1 and reversed_matrix[2, 0] == 1


def test_adjacency_rejects_unknown_fips(edges):
    with pytest.raises(KeyError, match="not in the frame"):
        queen_adjacency(edges, ["06037"])


def write_frame(counties, tmp_path, change):
    frame = counties.head(5).copy()
    frame = change(frame)
    path = tmp_path / "counties.parquet"
    gpd.GeoDataFrame(frame, geometry="geometry", crs=counties.crs).to_parquet(path)
    return path


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda f: f.drop(columns="median_age"), "missing column"),
        (lambda f: f.assign(fips=["01001"] * 5), "duplicate FIPS"),
        (lambda f: f.assign(population=[1, 2, -3, 4, 5]), "non-negative"),
        (lambda f: f.assign(population=[1, 2, None, 4, 5]), "non-negative"),
        (lambda f: f.assign(fips=["1001", "01003", "01005", "01007", "01009"]), "5-digit"),
    ],
)
def test_load_counties_names_file_and_problem(counties, tmp_path, change, message):
    path = write_frame(counties, tmp_path, change)
    for load in (load_counties, load_county_table):
        with pytest.raises(DataFileError, match=message) as caught:
            load(path)
        assert str(path) in str(caught.value)


def test_county_table_is_the_frame_without_its_geometry(counties):
    """Study 1's scenarios read the table alone (no geopandas): the same values and
    dtypes as load_counties' columns, in the same order."""
    table = load_county_table(COUNTIES)
    assert list(table.columns) == list(COUNTY_COLUMNS)
    expected = pd.DataFrame(counties[list(COUNTY_COLUMNS)])
    pd.testing.assert_frame_equal(table, expected, check_exact=True)


def test_load_queen_edges_rejects_repeats_and_self_loops(tmp_path):
    path = tmp_path / "edges.csv"
    pd.DataFrame({"fips_a": ["01001", "01003"], "fips_b": ["01003", "01001"]}).to_csv(
        path, index=False
    )
    with pytest.raises(DataFileError, match="more than once"):
        load_queen_edges(path)
    pd.DataFrame({"fips_a": ["01001"], "fips_b": ["01001"]}).to_csv(path, index=False)
    with pytest.raises(DataFileError, match="itself"):
        load_queen_edges(path)
    pd.DataFrame({"a": ["01001"], "b": ["01003"]}).to_csv(path, index=False)
    with pytest.raises(DataFileError, match=str(path)):
        load_queen_edges(path)


def test_missing_file_is_named(tmp_path):
    with pytest.raises(DataFileError, match="not found"):
        load_counties(tmp_path / "nope.parquet")
    with pytest.raises(DataFileError, match="not found"):
        load_county_table(tmp_path / "nope.parquet")
