"""Study 2's library: age adjustment, the urban rule, disparity ratios, the noisy prior's
accounting, calibrations as published frames, the simulation loop and the stand-in."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
from workflow_helpers import REPO

from dpsynth.data.pennsylvania import load_pennlc
from dpsynth.data.pennsylvania_standin import (
    CANCERS,
    STANDIN_AGE_GROUPS,
    expand_populations,
    standin_strata,
)
from dpsynth.data.standard_population import load_standard_population
from dpsynth.mechanisms.geometric import geometric_log_pmf
from dpsynth.study2 import (
    PRIOR_SENSITIVITY,
    AgeAdjuster,
    calibration_frame,
    calibration_from_frame,
    county_urban,
    group_totals,
    metric_values,
    prior_group_labels,
    prior_rates,
    release_strata,
    simulate,
    study_calibration,
    study_groups,
    summarise_draws,
    total_epsilon,
)

WEIGHTS = pd.Series({"young": 0.6, "old": 0.4})


def small_strata() -> pd.DataFrame:
    """Two counties x two races x two sexes x two age bands, cases and populations by hand."""
    rows = []
    for county, race, sex, age in itertools.product(
        ("a", "b"), ("w", "o"), ("f", "m"), ("young", "old")
    ):
        rows.append({"county": county, "race": race, "sex": sex, "age": age})
    frame = pd.DataFrame(rows)
    frame["population"] = np.arange(1, len(frame) + 1) * 1000
    frame["cases"] = np.array([1, 4, 0, 3, 2, 6, 1, 2, 0, 5, 1, 7, 3, 2, 2, 9])
    return frame


# ---- age adjustment -----------------------------------------------------------------------
def test_age_adjusted_rate_matches_a_hand_computation():
    strata = pd.DataFrame(
        {
            "county": ["a", "a", "b", "b"],
            "race": "w",
            "sex": "f",
            "age": ["young", "old", "young", "old"],
            "population": [1000, 2000, 4000, 500],
            "cases": [1, 4, 2, 3],
        }
    )
    groups = {"a": strata["county"].eq("a").to_numpy(), "all": np.ones(4, bool)}
    rates = AgeAdjuster(strata, WEIGHTS, groups).rates(strata["cases"].to_numpy())
    # a: 0.6 * 1/1000 + 0.4 * 4/2000 = 0.0014 -> 140 per 100,000
    # all: 0.6 * 3/5000 + 0.4 * 7/2500 = 0.00036 + 0.00112 = 0.00148 -> 148
    np.testing.assert_allclose(rates, [140.0, 148.0])


def test_age_adjustment_counts_a_shared_population_once():
    # two cancer types of one county x age x race x sex share its population
    strata = pd.DataFrame(
        {
            "county": "a",
            "cancer": ["x", "y", "x", "y"],
            "race": "w",
            "sex": "f",
            "age": ["young", "young", "old", "old"],
            "population": [1000, 1000, 2000, 2000],
            "cases": [1, 2, 4, 6],
        }
    )
    groups = {"all": np.ones(4, bool), "x": strata["cancer"].eq("x").to_numpy()}
    rates = AgeAdjuster(strata, WEIGHTS, groups).rates(strata["cases"].to_numpy())
    # all cancers: 0.6 * 3/1000 + 0.4 * 10/2000 = 0.0038; cancer x: 0.6/1000 + 0.4*4/2000
    np.testing.assert_allclose(rates, [380.0, 140.0])


def test_age_adjuster_takes_many_rows_and_float_counts():
    strata = small_strata()
    adjuster = AgeAdjuster(strata, WEIGHTS, {"all": np.ones(len(strata), bool)})
    counts = np.vstack([strata["cases"], strata["cases"] * 2.5])
    rates = adjuster.rates(counts)
    assert rates.shape == (2, 1)
    np.testing.assert_allclose(rates[1], rates[0] * 2.5)


def test_age_adjuster_refuses_an_empty_band():
    strata = small_strata()
    only_young = strata["age"].eq("young").to_numpy()
    with pytest.raises(ValueError, match="no population in age band"):
        AgeAdjuster(strata, WEIGHTS, {"young only": only_young})


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


# ---- disparity ratios ----------------------------------------------------------------------
def test_disparity_ratios_are_ratios_of_age_adjusted_group_rates():
    strata = small_strata()
    urban = {"a": True, "b": False}
    groups, ratios = study_groups(
        strata,
        urban,
        {"numerator": "o", "denominator": "w"},
        [
            {
                "name": "urban_women",
                "where": {"urban": True, "sex": "f"},
                "numerator": {"race": "o"},
                "denominator": {"race": "w"},
            }
        ],
    )
    values = metric_values(AgeAdjuster(strata, WEIGHTS, groups), ratios, strata["cases"])

    def aar(mask):
        sub = strata[mask]
        by_age = sub.groupby("age")[["cases", "population"]].sum()
        return float((WEIGHTS * by_age["cases"] / by_age["population"]).sum())

    s = strata
    expected = {
        "ratio_urban_rural": aar(s.county == "a") / aar(s.county == "b"),
        "ratio_race_female": aar((s.race == "o") & (s.sex == "f"))
        / aar((s.race == "w") & (s.sex == "f")),
        "ratio_race_male": aar((s.race == "o") & (s.sex == "m"))
        / aar((s.race == "w") & (s.sex == "m")),
        "ratio_urban_women": aar((s.race == "o") & (s.sex == "f") & (s.county == "a"))
        / aar((s.race == "w") & (s.sex == "f") & (s.county == "a")),
    }
    for metric, value in expected.items():
        assert values[metric].iloc[0] == pytest.approx(value, rel=1e-12), metric


def test_subgroup_on_an_unknown_column_is_named():
    with pytest.raises(KeyError, match="colour"):
        study_groups(
            small_strata(),
            {"a": True, "b": False},
            {"numerator": "o", "denominator": "w"},
            [
                {
                    "name": "x",
                    "where": {"colour": "red"},
                    "numerator": {"race": "o"},
                    "denominator": {"race": "w"},
                }
            ],
        )


# ---- the noisy prior's privacy accounting ----------------------------------------------------
def test_group_totals_move_by_at_most_the_sensitivity_under_move_one_event():
    strata = small_strata()
    labels = prior_group_labels(strata, ("race", "sex", "age"))
    y = strata["cases"].to_numpy()
    base = group_totals(y, labels)
    worst = 0
    for i, j in itertools.permutations(range(len(y)), 2):
        if y[i] == 0:
            continue
        x = y.copy()
        x[i] -= 1
        x[j] += 1
        worst = max(worst, int(np.abs(group_totals(x, labels) - base).sum()))
    assert worst == PRIOR_SENSITIVITY == 2


def test_noisy_prior_release_is_eps_prior_dp_for_neighbours():
    # exact log-likelihood ratio of the released noisy totals, over a grid of outputs
    strata = small_strata()
    labels = prior_group_labels(strata, ("race", "sex", "age"))
    y = strata["cases"].to_numpy()
    x = y.copy()
    x[1] -= 1  # move one event to a stratum of another prior group
    x[2] += 1
    t_y, t_x = group_totals(y, labels), group_totals(x, labels)
    eps_prior = 0.3
    outputs = t_y.to_numpy()[None, :] + np.arange(-6, 7)[:, None]
    loss = (
        geometric_log_pmf(outputs - t_y.to_numpy(), eps_prior)
        - geometric_log_pmf(outputs - t_x.to_numpy(), eps_prior)
    ).sum(axis=1)
    assert np.abs(loss).max() <= eps_prior + 1e-12
    assert np.abs(loss).max() == pytest.approx(eps_prior)  # attained: the bound is tight


def test_total_budget_adds_the_prior_budget_only_for_the_noisy_prior():
    assert total_epsilon(1.0, "noisy", 0.5) == pytest.approx(1.5)
    assert total_epsilon(1.0, "public") == 1.0
    assert total_epsilon(1.0, "national") == 1.0
    with pytest.raises(ValueError, match="epsilon_prior"):
        total_epsilon(1.0, "noisy", None)


def test_prior_rates_public_noisy_and_national():
    strata = small_strata()
    keys = ("race", "sex", "age")
    public = prior_rates(strata, keys, "public")
    sel = (strata.race == "o") & (strata.sex == "m") & (strata.age == "old")
    by_hand = strata.loc[sel, "cases"].sum() / strata.loc[sel, "population"].sum()
    np.testing.assert_allclose(public[sel.to_numpy()], by_hand)
    noisy = prior_rates(strata, keys, "noisy", np.random.default_rng(4), 0.5)
    again = prior_rates(strata, keys, "noisy", np.random.default_rng(4), 0.5)
    np.testing.assert_array_equal(noisy, again)
    assert np.all(noisy > 0)
    # one rate per group: strata of a group share it
    assert len(np.unique(noisy[sel.to_numpy()])) == 1
    with pytest.raises(ValueError, match="rng and epsilon_prior"):
        prior_rates(strata, keys, "noisy")
    with pytest.raises(KeyError, match="national_rate"):
        prior_rates(strata, keys, "national")


def test_release_strata_leaves_out_empty_strata():
    strata = small_strata()
    strata.loc[3, ["population", "cases"]] = 0
    kept, dropped = release_strata(strata)
    assert dropped == 1 and len(kept) == len(strata) - 1
    strata.loc[3, "cases"] = 1
    with pytest.raises(ValueError, match="zero population"):
        release_strata(strata)


# ---- calibrations and simulation ---------------------------------------------------------
def study_frame() -> pd.DataFrame:
    strata = small_strata()
    strata["prior_rate"] = prior_rates(strata, ("race", "sex", "age"), "public")
    return strata


@pytest.mark.parametrize("label", ["untruncated", "truncated_paper", "truncated_certified"])
def test_published_calibration_frame_rebuilds_the_calibration(label):
    strata = study_frame()
    cal = study_calibration(label, 2.0, strata)
    frame = calibration_frame(cal, label)
    assert {"a", "b", "lower", "upper"} <= set(frame.columns)
    assert calibration_from_frame(frame, label, 2.0) == cal


def test_untruncated_shape_is_the_md_value_for_equal_populations_and_rates():
    strata = small_strata().assign(population=5000, prior_rate=1e-3)
    cal = study_calibration("untruncated", 1.0, strata)
    np.testing.assert_allclose(cal.a, strata["cases"].sum() / (np.e - 1.0), rtol=1e-9)


def test_truncated_shapes_are_orders_of_magnitude_smaller_on_pennlc(pennlc):
    # seed 001 sec 3.2: the untruncated a grow with y., the truncated ones with E[y_i]
    strata, _ = release_strata(pennlc)
    strata["prior_rate"] = prior_rates(strata, ("race", "sex", "age"), "public")
    untruncated = study_calibration("untruncated", 1.0, strata)
    truncated = study_calibration("truncated_paper", 1.0, strata)
    assert untruncated.a.min() >= strata["cases"].sum() / (np.e - 1.0) * (1 - 1e-12)
    assert truncated.a.max() * 100 < untruncated.a.min()


def test_simulate_measures_every_dataset_and_stays_within_bounds():
    strata = study_frame()
    groups, ratios = study_groups(
        strata, {"a": True, "b": False}, {"numerator": "o", "denominator": "w"}
    )
    adjuster = AgeAdjuster(strata, WEIGHTS, groups)
    cal = study_calibration("truncated_certified", 1.0, strata)
    rng = np.random.default_rng(5)
    metrics, counties = simulate(strata["cases"], cal, adjuster, ratios, 7, rng, batch=3)
    assert len(metrics) == len(counties) == 7
    assert list(counties.columns) == ["a", "b"]
    assert (metrics["n_outside_bounds"] == 0).all()
    # the total is fixed, so the crude state rate is too; the adjusted one varies little
    assert np.isfinite(metrics["ratio_urban_rural"]).all()


def test_summarise_draws_gives_median_and_central_95_band():
    frame = pd.DataFrame({"mechanism": "m", "epsilon": 1.0, "v": np.arange(1.0, 102.0)})
    out = summarise_draws(frame, ["mechanism", "epsilon"], ["v"]).iloc[0]
    # 101 values 1..101: median 51, quantile 0.025 at 1 + 2.5 = 3.5, 0.975 at 98.5
    assert (out["median"], out["lower"], out["upper"]) == (51.0, 3.5, 98.5)


# ---- the stand-in ------------------------------------------------------------------------
@pytest.fixture(scope="module")
def pennlc():
    return load_pennlc(REPO / "data/pennlc_strata.parquet")


@pytest.fixture(scope="module")
def standard():
    return load_standard_population(REPO / "data/us_standard_population_2000.csv")


def test_standin_has_the_papers_shape_and_total(pennlc, standard):
    counties = sorted(pennlc["county"].unique())
    urban = pd.Series([k % 3 == 0 for k in range(len(counties))], index=counties)
    strata = standin_strata(pennlc, standard, urban, np.random.default_rng(1))
    assert len(strata) == 67 * 9 * 13 * 3 * 2 == 47_034
    assert strata["cases"].sum() == 26_116
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
