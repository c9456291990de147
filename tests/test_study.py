"""The study stage's library on small tables of its own: definitions, the data checks,
the measures, the calibration round trip and the epsilon guide."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy.stats import spearmanr
from workflow_helpers import filled_definition

from dpcounts.studies.stage.definition import StudyConfigError
from dpcounts.studies.stage.guide import smallest_epsilon
from dpcounts.studies.stage.measures import study_measures
from dpcounts.studies.stage.selection import parse_age_band
from dpcounts.studies.stage.table import StudyDataError, load_study_table


def table(tmp_path, frame=None, name="strata.csv"):
    rng = np.random.default_rng(3)
    if frame is None:
        tracts = [f"t{k:02d}" for k in range(12)]
        frame = pd.DataFrame(
            [(t, p, int(rng.integers(500, 5000))) for t in tracts for p in ("early", "late")],
            columns=["tract", "period", "pop"],
        )
        frame["deaths"] = rng.poisson(frame["pop"] * 0.004)
        frame["region"] = np.where(frame["tract"] < "t06", "north", "south")
    path = tmp_path / name
    frame.sample(frac=1, random_state=1).to_csv(path, index=False)  # rows in no order
    return path


def entry(path, **changes):
    base = {
        "table": str(path),
        "keys": ["tract", "period"],
        "count": "deaths",
        "population": "pop",
        "attributes": ["region"],
        "area": "tract",
        "arms": {"pg": ["certified"], "truncated": ["certified"], "md": ["paper"]},
        "epsilons": [0.5, 2.0, 8.0],
        "sets": 6,
        "sets_per_job": 6,
        "epsilons_per_job": 3,
        "disparities": [
            {
                "name": "late_vs_early",
                "numerator": {"period": "late"},
                "denominator": {"period": "early"},
            },  # fmt: skip
        ],
    }
    base.update(changes)
    return base


# ---- the definition ----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("changes", "key", "expected"),
    [
        ({"arms": {"pg": ["exactly"]}}, "studies.s.arms.pg", "got method 'exactly'"),
        ({"arms": {"laplace": ["paper"]}}, "studies.s.arms.laplace", "unknown mechanism"),
        (
            {
                "arms": [
                    {"mechanism": "pg", "method": "paper", "name": "x"},
                    {"mechanism": "pg", "method": "exact", "name": "x"},
                ]
            },
            "studies.s.arms",
            "arm(s) ['x'] given twice",
        ),  # fmt: skip
        ({"arms": [{"mechanism": "md", "method": "exact"}]}, "studies.s.arms[0]", "md has"),
        ({"population_keys": ["county"]}, "studies.s.population_keys", "not among the keys"),
        ({"epsilons": [0.5, math.inf]}, "studies.s.epsilons[1]", "finite number > 0"),
        (
            {"epsilons": {"start": 1, "stop": math.nan, "num": 3}},
            "studies.s.epsilons.stop",
            "finite number > 0",
        ),  # fmt: skip
        ({"area": "county"}, "studies.s.area", "not one of the keys"),
        (
            {"prior": {"source": "sanitised", "by": ["county"], "epsilon": 0.1}},
            "studies.s.prior.by",
            "expected key or attribute columns",
        ),  # fmt: skip
        ({"attributes": ["tract"]}, "studies.s.keys", "named twice"),
        ({"area": None, "map_epsilons": [1.0]}, "studies.s.map_epsilons", "set studies.s.area"),
    ],
)
def test_a_bad_definition_names_its_key_in_one_line(tmp_path, changes, key, expected):
    with pytest.raises(StudyConfigError) as error:
        filled_definition("s", entry(tmp_path / "x.csv", **changes))
    message = str(error.value)
    assert message.startswith(f"config key {key}:") and expected in message
    assert "\n" not in message


def test_an_entry_whose_defaults_were_not_filled_is_refused_by_key(tmp_path):
    """The library keeps no copy of the schema's defaults: an unchecked entry is refused,
    naming the first missing key."""
    from dpcounts.studies.stage.definition import study_definition

    with pytest.raises(StudyConfigError, match="config key studies.s.prior: missing; expected"):
        study_definition("s", entry(tmp_path / "x.csv"))


# ---- the data ----------------------------------------------------------------------------
def test_the_table_is_checked_and_sorted_by_its_keys(tmp_path):
    strata = load_study_table(filled_definition("s", entry(table(tmp_path))))
    assert list(strata.columns) == ["tract", "period", "deaths", "pop", "region"]
    assert strata[["tract", "period"]].equals(
        strata[["tract", "period"]].sort_values(["tract", "period"]).reset_index(drop=True)
    )
    assert strata["deaths"].dtype == np.int64


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"count": "cases"}, "config key studies.s.count: "),
        ({"rows": {"period": "middle"}}, "studies.s.rows.period: value(s) ['middle'] not in"),
        (
            {
                "disparities": [
                    {"name": "d", "numerator": {"period": "late"}, "denominator": {"period": "mid"}}
                ]
            },
            "studies.s.disparities[0].denominator.period: value(s) ['mid'] not in the "
            "study's strata; "
            "'period' holds 'early', 'late'",
        ),  # fmt: skip
        (
            {
                "disparities": [
                    {"name": "d", "numerator": {"county": "x"}, "denominator": {"period": "late"}}
                ]
            },
            "studies.s.disparities[0].numerator.county: no column 'county' in the study's strata",
        ),  # fmt: skip
    ],
)
def test_what_the_study_names_must_exist_in_the_data(tmp_path, changes, expected):
    definition = filled_definition("s", entry(table(tmp_path), **changes))
    with pytest.raises(StudyDataError, match=None) as error:
        load_study_table(definition)
    assert expected in str(error.value)


def test_fractional_counts_are_refused_unless_rounding_is_asked_for(tmp_path):
    frame = pd.read_csv(table(tmp_path))
    frame["deaths"] = frame["deaths"] + np.where(frame.index == 3, 1 / 3, 0.0)
    path = table(tmp_path, frame, "fractional.csv")
    with pytest.raises(StudyDataError, match=r"fractional count.*rounding: nearest"):
        load_study_table(filled_definition("s", entry(path)))
    strata = load_study_table(filled_definition("s", entry(path, rounding="nearest")))
    assert (strata["deaths"].to_numpy() == np.round(strata["deaths"])).all()


def test_counts_above_the_population_fail_the_shared_validator(tmp_path):
    frame = pd.read_csv(table(tmp_path))
    frame.loc[0, "deaths"] = frame.loc[0, "pop"] + 1
    with pytest.raises(ValueError, match="above 'pop'.*count <= population"):
        load_study_table(filled_definition("s", entry(table(tmp_path, frame, "above.csv"))))


def test_empty_strata_are_left_out_and_the_rest_kept(tmp_path):
    frame = pd.read_csv(table(tmp_path))
    frame.loc[0, ["deaths", "pop"]] = 0
    strata = load_study_table(filled_definition("s", entry(table(tmp_path, frame, "e.csv"))))
    assert len(strata) == len(frame) - 1


@pytest.mark.parametrize(
    ("label", "band"),
    [
        ("45-54", (45, 55)),
        ("40.59", (40, 60)),
        ("85+", (85, None)),
        ("Under.40", (0, 40)),
        ("< 1 year", (0, 1)),
    ],  # fmt: skip
)
def test_age_band_labels(label, band):
    assert parse_age_band(label) == band


# ---- the measures ------------------------------------------------------------------------
def test_measures_on_the_truth_and_against_scipy(tmp_path):
    definition = filled_definition("s", entry(table(tmp_path)))
    strata = load_study_table(definition)
    measures = study_measures(definition, strata)
    y = strata["deaths"].to_numpy()
    truth = measures.values(y, y).iloc[0]
    assert truth["rmse"] == 0 and truth["rank_correlation"] == pytest.approx(1)
    late = strata["period"] == "late"
    expected = (y[late].sum() / strata.loc[late, "pop"].sum()) / (
        y[~late].sum() / strata.loc[~late, "pop"].sum()
    )
    assert truth["disparity:late_vs_early"] == pytest.approx(expected, rel=1e-12)
    z = np.random.default_rng(0).multinomial(y.sum(), np.full(y.size, 1 / y.size), size=3)
    values = measures.values(z, y)
    area_true = measures.area_rates(y)[0]
    for k in range(3):
        rho = spearmanr(measures.area_rates(z[k])[0], area_true).statistic
        assert values["rank_correlation"][k] == pytest.approx(rho, abs=1e-12)
        rmse = np.sqrt(np.mean(((z[k] - y) / strata["pop"]) ** 2)) * 1e5
        assert values["rmse"][k] == pytest.approx(rmse, rel=1e-12)


def test_smallest_epsilon_needs_every_larger_epsilon_to_hold():
    eps = np.array([0.1, 1.0, 10.0, 100.0])
    assert smallest_epsilon(eps, np.array([True, False, True, True])) == 10.0
    assert smallest_epsilon(eps, np.array([True, True, True, True])) == 0.1
    assert math.isnan(smallest_epsilon(eps, np.array([True, True, True, False])))


def test_a_wonder_export_is_a_study_table():
    """CDC WONDER's layout (quoted tab-separated, Notes column, totals, footer) reads as
    strata keyed by its code columns; its descriptive columns are not taken."""
    spec = {
        "table": "tests/fixtures/wonder/good.txt",
        "format": "wonder",
        "keys": ["county_code", "age_group_code"],
        "count": "deaths",
        "population": "population",
        "area": "county_code",
        "arms": {"pg": ["certified"]},
        "epsilons": [1.0],
        "sets": 1, "sets_per_job": 1, "epsilons_per_job": 1,
    }  # fmt: skip
    strata = load_study_table(filled_definition("w", spec))
    assert list(strata.columns) == ["county_code", "age_group_code", "deaths", "population"]
    assert strata["county_code"].str.fullmatch(r"\d{5}").all()
    assert (strata["deaths"] <= strata["population"]).all() and len(strata) > 0


def test_average_ranks_are_scipys_rankdata():
    """The rank correlation's ranks (no scipy.stats import) equal scipy.stats.rankdata's:
    ties averaged, a row with a NaN all NaN, one row or many."""
    from scipy.stats import rankdata

    from dpcounts.studies.stage.measures import average_ranks

    rng = np.random.default_rng(7)
    rows = rng.integers(0, 6, size=(50, 40)).astype(float)  # many ties
    rows[3, 5] = np.nan
    rows[7] = 2.0  # one run
    rows[8] = rng.normal(size=40)  # none
    assert np.array_equal(average_ranks(rows), rankdata(rows, axis=1), equal_nan=True)
    assert np.array_equal(average_ranks(rows[9]), rankdata(rows[9]))
    assert np.isnan(average_ranks(rows)[3]).all() and not np.isnan(average_ranks(rows)[4]).any()
    assert np.array_equal(average_ranks(rows[:, :1]), rankdata(rows[:, :1], axis=1))
    # long rows of many ties, signed zeros among them: the sort's order within a run of
    # equal values (not stable past a few elements) must not show in the ranks
    wide = rng.integers(-3, 4, size=(20, 3_000)).astype(float)
    wide[wide == 0] = rng.choice([0.0, -0.0], size=int((wide == 0).sum()))
    wide[2, ::7] = rng.normal(size=wide[2, ::7].size)
    assert np.array_equal(average_ranks(wide), rankdata(wide, axis=1))
