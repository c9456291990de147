from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dpcounts.studies.metrics import (
    BAND_COLUMNS,
    group_rate_per_100k,
    pooled_mean,
    rmse_per_100k,
    summarise,
    summarise_frame,
)


def test_rmse_by_hand():
    truth = np.array([1e-4, 2e-4])
    draws = np.array([[1e-4, 2e-4], [2e-4, 4e-4]])
    # Second row: errors 1e-4 and 2e-4 -> sqrt((1 + 4) / 2) * 1e-4 * 1e5 = sqrt(2.5) * 10
    np.testing.assert_allclose(rmse_per_100k(draws, truth), [0.0, np.sqrt(2.5) * 10])


def test_group_rate_pools_counts():
    pop = np.array([1000, 3000, 6000])
    rates = np.array([1e-3, 2e-3, 5e-3])
    members = np.array([True, True, False])
    # (1 + 6) events over 4000 people = 175 per 100,000.
    assert group_rate_per_100k(rates, pop, members) == pytest.approx(175.0)
    batched = group_rate_per_100k(np.vstack([rates, 2 * rates]), pop, members)
    np.testing.assert_allclose(batched, [175.0, 350.0])
    with pytest.raises(ValueError, match="no cells"):
        group_rate_per_100k(rates, pop, np.zeros(3, bool))


def test_summaries():
    s = summarise(np.arange(1001))
    assert s == {"median": 500.0, "lower": 25.0, "upper": 975.0}
    frame = pd.DataFrame({"g": ["a"] * 101 + ["b"] * 101, "value": list(range(101)) * 2})
    out = summarise_frame(frame, ["g"])
    assert list(out["g"]) == ["a", "b"] and list(out["median"]) == [50.0, 50.0]


def test_summaries_skip_undefined_values():
    assert summarise([1.0, np.nan, 3.0])["median"] == 2.0
    assert np.isnan(summarise([np.nan])["median"])


def test_summaries_are_numpys_linear_quantiles():
    """The one median-and-band: numpy's linear quantiles, bit for bit (the artifacts of
    every study and of the pseudo-posterior tables depend on these exact bytes)."""
    rng = np.random.default_rng(3)
    for size in (1, 2, 7, 40, 101):
        sample = rng.gamma(2.0, 1e-4, size) * 1e5
        s = summarise(sample)
        assert [s["lower"], s["median"], s["upper"]] == list(
            np.quantile(sample, [0.025, 0.5, 0.975])
        )


def test_summaries_of_infinite_values_are_limits():
    # numpy's interpolation gives NaN for each of these
    assert summarise([1.0, 2.0, np.inf]) == pytest.approx(
        {"median": 2.0, "lower": 1.05, "upper": np.inf}
    )
    assert summarise([1.0, np.inf, np.inf])["upper"] == np.inf
    band = summarise([-np.inf, 2.0, np.inf])
    assert band["lower"] == -np.inf and band["median"] == 2.0 and band["upper"] == np.inf
    assert np.isnan(summarise([-np.inf, np.inf])["median"])


def test_summarise_frame_keeps_key_types_and_nan_keys():
    frame = pd.DataFrame(
        {"g": [2, 2, 1, 1], "e": [np.nan, np.nan, 0.5, 0.5], "value": [1.0, 3.0, 5.0, np.nan]}
    )
    out = summarise_frame(frame, ["g", "e"])
    assert list(out.columns) == ["g", "e", *BAND_COLUMNS]
    assert list(out["g"]) == [1, 2] and out["g"].dtype == np.int64
    assert list(out["median"]) == [5.0, 2.0] and np.isnan(out["e"].iloc[1])


@pytest.mark.parametrize("seed", range(4))
def test_summarise_frame_is_summarise_of_each_group_bit_for_bit(seed):
    """All groups at once give, to the bit, what :func:`summarise` gives each group: NaN
    values left out, infinities as limits, ties, one-value and all-NaN groups, int, text
    and float keys (a NaN key its own group)."""
    rng = np.random.default_rng(seed)
    m = 3000
    frame = pd.DataFrame({
        "s": rng.integers(1, 4, m),
        "arm": rng.choice(["md", "pg", "geometric"], m),
        "eps": rng.choice([0.01, 0.1, 1.0, np.nan], m),
        "value": rng.standard_normal(m) * 10.0 ** rng.integers(-6, 6, m),
    })  # fmt: skip
    frame.loc[rng.random(m) < 0.1, "value"] = np.nan
    frame.loc[rng.random(m) < 0.01, "value"] = rng.choice([np.inf, -np.inf])
    frame.loc[rng.random(m) < 0.3, "value"] = rng.integers(0, 3)  # ties
    frame.loc[(frame["s"] == 3) & (frame["arm"] == "md"), "value"] = np.nan  # all NaN
    frame = pd.concat([frame, pd.DataFrame({"s": [9], "arm": ["x"], "eps": [2.0], "value": [4.0]})])
    for by in (["s"], ["arm", "eps"], ["s", "arm", "eps"]):
        out = summarise_frame(frame, by)
        groups = list(frame.groupby(by, sort=True, dropna=False))
        assert len(out) == len(groups)
        for row, (keys, group) in zip(out.itertuples(index=False), groups, strict=True):
            keys = keys if isinstance(keys, tuple) else (keys,)
            assert [getattr(row, k) for k in by] == pytest.approx(list(keys), nan_ok=True)
            expected = summarise(group["value"])
            got = np.array([getattr(row, c) for c in BAND_COLUMNS])
            want = np.array([expected[c] for c in BAND_COLUMNS])
            assert np.array_equal(got.view(np.int64), want.view(np.int64)), (keys, got, want)


def test_pooled_mean_divides_summed_chunks():
    sums = pd.DataFrame({"k": ["b", "a", "a"], "sum": [6.0, 1.0, 2.0], "n": [3, 1, 2]})
    out = pooled_mean(sums, ["k"], "sum", "n")
    assert list(out.columns) == ["k", "rate"]
    assert list(out["k"]) == ["a", "b"] and list(out["rate"]) == [1.0, 2.0]


def test_median_interval_covers_the_median_as_often_as_it_says():
    """Distribution-free: over 4,000 samples of a skewed law the interval holds the true
    median at least 95% of the time (less than 97.5% too: not absurdly wide), and below 6
    values it is the range."""
    from dpcounts.studies.metrics import median_interval

    rng = np.random.default_rng(8)
    for n in (20, 101):
        hits = 0
        for _ in range(4000):
            lo, hi = median_interval(rng.exponential(size=n))
            hits += lo <= np.log(2) <= hi
        assert 0.945 <= hits / 4000 <= 0.975
    assert median_interval([3.0, 1.0, 2.0, np.nan]) == (1.0, 3.0)
    assert all(np.isnan(median_interval([np.nan])))


@pytest.mark.process
def test_median_interval_order_statistic_is_scipys_binomial_quantile():
    """The interval's order statistic is ``scipy.stats.binom.ppf(q, n, 1/2)`` for the
    levels in use, computed exactly (at a tie, where the cdf equals q, the exact answer:
    scipy's floating point can step past it), and without importing scipy.stats."""
    import subprocess
    import sys

    from scipy.stats import binom

    from dpcounts.studies.metrics import _binomial_half_quantile

    for q in (0.05, 0.025, 0.005, 0.3):
        for n in range(1, 401):
            assert _binomial_half_quantile(q, n) == int(binom.ppf(q, n, 0.5)), (q, n)
    assert _binomial_half_quantile(0.125, 3) == 0  # P(B <= 0) = 1/8 exactly
    assert _binomial_half_quantile(0.5, 35) == 17  # P(B <= 17) = 1/2 exactly
    with pytest.raises(ValueError, match="strictly between 0 and 1"):
        _binomial_half_quantile(1.0, 10)
    code = (
        "import sys; from dpcounts.studies.metrics import median_interval; "
        "median_interval(range(100)); assert 'scipy.stats' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
