"""Group rates (:class:`dpcounts.studies.stage.rates.GroupRates`): direct age adjustment by hand,
shared populations counted once, many rows at once, and refused empty bands."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpcounts.studies.stage.rates import GroupRates

WEIGHTS = pd.Series({"young": 0.6, "old": 0.4})
UNIT_KEYS = ["county", "age", "race", "sex"]


def rates_of(strata: pd.DataFrame, groups) -> GroupRates:
    """Age-adjusted rates whose population units are county x age x race x sex."""
    unit = strata[UNIT_KEYS].astype(str).agg("|".join, axis=1).to_numpy()
    return GroupRates(strata["population"], groups, band=strata["age"], weights=WEIGHTS,
                      unit=unit)  # fmt: skip


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


def test_crude_rates_without_bands_are_events_over_population():
    strata = small_strata()
    groups = {"a": strata["county"].eq("a").to_numpy()}
    rate = GroupRates(strata["population"], groups).rates(strata["cases"].to_numpy())
    a = strata[strata["county"] == "a"]
    assert rate[0] == pytest.approx(a["cases"].sum() / a["population"].sum() * 1e5, rel=1e-12)


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
    rates = rates_of(strata, groups).rates(strata["cases"].to_numpy())
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
    rates = rates_of(strata, groups).rates(strata["cases"].to_numpy())
    # all cancers: 0.6 * 3/1000 + 0.4 * 10/2000 = 0.0038; cancer x: 0.6/1000 + 0.4*4/2000
    np.testing.assert_allclose(rates, [380.0, 140.0])


def test_group_rates_takes_many_rows_and_float_counts():
    strata = small_strata()
    adjuster = rates_of(strata, {"all": np.ones(len(strata), bool)})
    counts = np.vstack([strata["cases"], strata["cases"] * 2.5])
    rates = adjuster.rates(counts)
    assert rates.shape == (2, 1)
    np.testing.assert_allclose(rates[1], rates[0] * 2.5)


def test_group_rates_refuses_an_empty_band():
    strata = small_strata()
    only_young = strata["age"].eq("young").to_numpy()
    with pytest.raises(ValueError, match="no population in age band"):
        rates_of(strata, {"young only": only_young})


@settings(max_examples=50, deadline=None)
@given(rate=st.floats(1e-6, 1e-2), populations=st.lists(st.integers(1, 10**6), min_size=4,
                                                        max_size=4))  # fmt: skip
def test_a_constant_rate_is_its_own_age_adjusted_rate(rate, populations):
    weights = pd.Series({"a": 0.2, "b": 0.3, "c": 0.5})
    adjuster = GroupRates(populations, {"all": np.ones(4, bool)}, band=["a", "b", "c", "c"],
                          weights=weights)  # fmt: skip
    cases = [rate * p for p in populations]
    assert adjuster.rates(cases)[0] == pytest.approx(rate * 100_000)


def test_the_age_adjusted_rate_is_the_weighted_band_rates():
    weights = pd.Series({"young": 0.75, "old": 0.25})
    adjuster = GroupRates([1000, 1000], {"all": np.ones(2, bool)}, band=["young", "old"],
                          weights=weights)  # fmt: skip
    assert adjuster.rates([1, 30])[0] == pytest.approx((0.75 * 1 + 0.25 * 30) / 1000 * 100_000)
    with pytest.raises(ValueError, match="no population in age band"):
        GroupRates([10], {"all": np.ones(1, bool)}, band=["young"], weights=weights)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 300), st.integers(1, 12))
def test_a_partition_is_the_masks_object_to_the_bit(seed, n, groups):
    """GroupRates.partition (the release's utility report: one group per area, no mask per
    area) builds the same populations, indicator and rates, bit for bit, as the masks."""
    rng = np.random.default_rng(seed)
    codes = rng.integers(-1, groups, n)  # -1: in no group
    names = [f"area:{g}" for g in range(groups)]
    if not all((codes == g).any() for g in range(groups)):
        with pytest.raises(ValueError, match="has no population"):
            GroupRates.partition(np.ones(n), codes, names)
        return
    population = rng.gamma(0.5, 1e4, n) + rng.random(n)
    masks = GroupRates(population, {name: codes == g for g, name in enumerate(names)})
    fast = GroupRates.partition(population, codes, names)
    assert fast.names == masks.names and fast.bands == masks.bands
    assert np.array_equal(fast.weights, masks.weights)
    assert fast.population.tobytes() == masks.population.tobytes()
    for part in ("data", "indices", "indptr"):
        assert np.array_equal(getattr(fast._indicator, part), getattr(masks._indicator, part))
        assert getattr(fast._indicator, part).dtype == getattr(masks._indicator, part).dtype
    counts = rng.poisson(3.0, (4, n)).astype(float)
    assert fast.rates(counts).tobytes() == masks.rates(counts).tobytes()


def test_a_group_with_bands_of_its_own_is_adjusted_over_them():
    """``group_bands``: the old strata's rate over the band 'old' alone (its weight
    normalised to one: the crude rate of the band); every other group bit for bit as
    without it."""
    strata = small_strata()
    old = (strata["age"] == "old").to_numpy()
    groups = {"a": (strata["county"] == "a").to_numpy(), "old": old}
    unit = strata[UNIT_KEYS].astype(str).agg("|".join, axis=1).to_numpy()
    own = GroupRates(strata["population"], groups, band=strata["age"], weights=WEIGHTS,
                     unit=unit, group_bands={"old": ["old"]})  # fmt: skip
    plain = GroupRates(strata["population"], {"a": groups["a"]}, band=strata["age"],
                       weights=WEIGHTS, unit=unit)  # fmt: skip
    counts = np.vstack([strata["cases"].to_numpy(), strata["cases"].to_numpy()[::-1]])
    got = own.rates(counts)
    expected = counts[:, old].sum(axis=1) / strata.loc[old, "population"].sum() * 1e5
    assert got[:, 1] == pytest.approx(expected, rel=1e-12)
    assert got[:, 0].tobytes() == plain.rates(counts)[:, 0].tobytes()
    with pytest.raises(ValueError, match="no population in age band"):
        GroupRates(strata["population"], {"old": old}, band=strata["age"], weights=WEIGHTS,
                   group_bands={"old": ["young", "old"]})  # fmt: skip
