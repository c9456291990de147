"""The truncation bounds' Poisson quantiles (issue #27) are scipy's, bit for bit, without
scipy's slow root finder: on random means, on means put at the root of every integer (the
cells where the root finder decides) and nudged around it, and for the bounds."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import special, stats

from dpcounts.mechanisms.truncation import default_tail, poisson_quantile, truncation_bounds

QUANTILES = [1e-12, 5e-7, 4.9729472e-07, 5e-4, 0.025, 0.3, 0.5, 0.975, 0.9995, 1 - 5e-7]


def same_as_scipy(q: float, mean: np.ndarray) -> None:
    ours, theirs = poisson_quantile(q, mean), stats.poisson.ppf(q, mean)
    bad = np.flatnonzero(ours != theirs)
    assert ours.dtype == theirs.dtype and ours.shape == theirs.shape
    assert not bad.size, (q, mean[bad[:5]], ours[bad[:5]], theirs[bad[:5]])
    assert ours.tobytes() == theirs.tobytes()


@pytest.mark.parametrize("q", QUANTILES)
@pytest.mark.parametrize(
    "seed", [0, *(pytest.param(seed, marks=pytest.mark.slow) for seed in (1, 2))]
)
def test_random_means_give_scipys_quantiles(q, seed):
    rng = np.random.default_rng(seed)
    mean = np.exp(rng.uniform(np.log(1e-8), np.log(1e6), 20_000))
    mean[:50] = rng.integers(1, 60, 50).astype(float)  # whole means
    same_as_scipy(q, mean)


@pytest.mark.parametrize("q", QUANTILES)
def test_means_at_and_around_every_integers_root_give_scipys_quantiles(q):
    """pdtr(k, mean) = q exactly: the continuous root is the integer k itself, and a
    nudge moves it just above or below; here the root finder's error decides."""
    k = np.concatenate([np.arange(0, 200), np.geomspace(200, 2e5, 60).round()])
    at = special.pdtri(k, q)
    at = at[np.isfinite(at) & (at > 0)]
    nudged = [at * (1 + r) for r in (-1e-6, -1e-9, -1e-12, 1e-12, 1e-9, 1e-6)]
    ulps = [np.nextafter(at, np.inf), np.nextafter(at, 0), at]
    for _ in range(4):
        ulps.append(np.nextafter(ulps[-3], np.inf))
        ulps.append(np.nextafter(ulps[-3], 0))
    same_as_scipy(q, np.concatenate([at, *nudged, *ulps]))


def test_the_bounds_are_those_of_scipys_quantiles():
    rng = np.random.default_rng(4)
    for cells, inflation in ((2, 1.0), (500, 1.0), (20_000, 1.3)):
        expected = np.exp(rng.normal(0, 2.5, cells))
        total = int(expected.sum())
        for tail in (None, 0.05):
            q = (default_tail(cells) if tail is None else tail) / 2.0
            lower = stats.poisson.ppf(q, expected / inflation).astype(np.int64)
            upper = stats.poisson.ppf(1.0 - q, expected * inflation)
            upper = np.minimum(upper, total).astype(np.int64)
            try:
                ours = truncation_bounds(expected, total, tail, inflation)
            except ValueError:  # infeasible: so are scipy's bounds
                assert lower.sum() > total or upper.sum() < total
                continue
            assert np.array_equal(ours[0], lower) and np.array_equal(ours[1], upper)


@pytest.mark.parametrize(
    ("q", "mean"),
    [(0.0, [1.0, 2.0]), (1.0, [1.0, 2.0]), (0.3, [np.nan, 2.0]), (0.3, [np.inf, 0.0]),
     (0.3, 4.0), (0.3, [[1.0, 3.0]])],
)  # fmt: skip
def test_outside_its_domain_scipy_computes_it_all(q, mean):
    ours, theirs = poisson_quantile(q, mean), stats.poisson.ppf(q, mean)
    assert np.asarray(ours).tobytes() == np.asarray(theirs).tobytes()


@pytest.mark.slow
def test_a_national_tables_repeated_means_give_scipys_quantiles():
    """Above DISTINCT_FROM means, each distinct mean is computed once and spread back."""
    from dpcounts.mechanisms.truncation import DISTINCT_FROM

    rng = np.random.default_rng(36)
    distinct = np.exp(rng.uniform(np.log(1e-4), np.log(1e4), 2_000))
    mean = distinct[rng.integers(0, distinct.size, DISTINCT_FROM + 1)]
    for q in (5e-7, 0.5, 1 - 5e-7):
        same_as_scipy(q, mean)


@pytest.mark.parametrize("inflation", [1.0, 1.3])
def test_a_national_tables_repeated_expected_counts_give_scipys_bounds(monkeypatch, inflation):
    """Above DISTINCT_FROM cells, the bounds factorise the expected counts once for both
    quantiles: the bounds of scipy's quantiles, cell by cell."""
    import dpcounts.mechanisms.truncation as truncation

    monkeypatch.setattr(truncation, "DISTINCT_FROM", 1_000)
    rng = np.random.default_rng(36)
    distinct = np.exp(rng.uniform(np.log(1e-2), np.log(1e3), 300))
    expected = distinct[rng.integers(0, distinct.size, 5_000)]
    total, q = int(expected.sum()), default_tail(expected.size) / 2.0
    lower, upper = truncation_bounds(expected, total, inflation=inflation)
    assert lower.dtype == upper.dtype == np.int64
    assert np.array_equal(lower, stats.poisson.ppf(q, expected / inflation).astype(np.int64))
    scipy_upper = np.minimum(stats.poisson.ppf(1.0 - q, expected * inflation), total)
    assert np.array_equal(upper, scipy_upper.astype(np.int64))
