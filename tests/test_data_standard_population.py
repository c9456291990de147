"""The US 2000 standard population table, its band weights and direct age adjustment."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpcounts.data.counties import DataFileError
from dpcounts.data.pennsylvania import PENNLC_AGE_BANDS
from dpcounts.data.standard_population import (
    load_standard_population,
    standard_weights,
)

PATH = Path(__file__).resolve().parents[1] / "data" / "us_standard_population_2000.csv"

# NCHS, Healthy People 2010 Statistical Notes no. 20, Table 1: the 2000 standard population
# in 11 groups, in thousands.
NCHS_11_GROUPS_THOUSANDS = {
    (0, 1): 3_795, (1, 5): 15_192, (5, 15): 39_977, (15, 25): 38_077, (25, 35): 37_233,
    (35, 45): 44_659, (45, 55): 37_030, (55, 65): 23_961, (65, 75): 18_136,
    (75, 85): 12_315, (85, None): 4_259,
}  # fmt: skip


@pytest.fixture(scope="module")
def table():
    return load_standard_population(PATH)


def test_total_is_the_published_274_634_thousand(table):
    assert len(table) == 19
    assert round(table["population"].sum() / 1000) == 274_634
    assert sum(NCHS_11_GROUPS_THOUSANDS.values()) == 274_634


def test_19_groups_aggregate_to_the_nchs_11_groups(table):
    bands = {str(k): k for k in NCHS_11_GROUPS_THOUSANDS}
    weights = standard_weights(table, bands)
    published = pd.Series({str(k): v for k, v in NCHS_11_GROUPS_THOUSANDS.items()})
    np.testing.assert_allclose(weights, published / published.sum(), atol=5e-6)


def test_pennlc_band_weights_sum_to_one_and_follow_the_table(table):
    weights = standard_weights(table, PENNLC_AGE_BANDS)
    assert weights.sum() == pytest.approx(1.0)
    total = table["population"].sum()
    over_70 = table.loc[table["age_start"] >= 70, "population"].sum()
    assert weights["70+"] == pytest.approx(over_70 / total)


def test_bands_off_the_table_edges_are_rejected(table):
    with pytest.raises(ValueError, match="group edges"):
        standard_weights(table, {"x": (0, 42)})


def test_load_rejects_gaps(table, tmp_path):
    path = tmp_path / "std.csv"
    table.drop(index=3).to_csv(path, index=False)
    with pytest.raises(DataFileError, match="gap"):
        load_standard_population(path)
