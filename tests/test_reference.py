"""The no-privacy reference (dpcounts.sampling.reference): its sampler draws the
Dirichlet-multinomial with total y. and weights y exactly, and the mechanisms' samplers
approach it as epsilon grows (the limit the study guide and the utility report rest on)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import chi_square_p_value, empirical
from scipy.special import gammaln

from dpcounts.sampling.enumeration import compositions
from dpcounts.sampling.reference import drawn_strata, no_privacy_draws, reference_batches


def dirichlet_multinomial_pmf(z: np.ndarray, alpha: np.ndarray) -> np.ndarray:
    """P(z) under DM(total, alpha), written from the textbook formula; cells with alpha 0
    must be 0 (their factor is 1 there and the law puts no mass elsewhere)."""
    positive = alpha > 0
    if np.any(z[:, ~positive] != 0):
        raise ValueError("a cell of weight 0 must be 0")
    z, a = z[:, positive].astype(float), alpha[positive].astype(float)
    total, weight = z.sum(axis=1), a.sum()
    log_p = (gammaln(total + 1) + gammaln(weight) - gammaln(total + weight)
             + (gammaln(z + a) - gammaln(z + 1) - gammaln(a)).sum(axis=1))  # fmt: skip
    return np.exp(log_p)


@pytest.mark.parametrize("y", [[3, 0, 1, 2], [1, 1, 0, 0, 4], [5, 2]])
def test_draws_follow_the_dirichlet_multinomial_exactly(y):
    y = np.array(y)
    total = int(y.sum())
    support = compositions(total, np.zeros(y.size, int), np.where(y > 0, total, 0))
    probs = dirichlet_multinomial_pmf(support, y)
    assert probs.sum() == pytest.approx(1.0, abs=1e-12)
    draws = no_privacy_draws(y, 40_000, np.random.default_rng(11))
    assert np.all(draws.sum(axis=1) == y.sum()) and np.all(draws[:, y == 0] == 0)
    assert chi_square_p_value(empirical(draws, support), probs) > 1e-3


def test_mean_and_variance_are_those_of_synthesis_noise():
    """Mean y_i, variance y. p (1 - p) 2y. / (1 + y.) with p = y_i / y. (about 2 y_i)."""
    y = np.array([40, 7, 0, 120, 3])
    draws = no_privacy_draws(y, 200_000, np.random.default_rng(5))
    total, p = y.sum(), y / y.sum()
    assert np.all(np.abs(draws.mean(axis=0) - y) <= 0.05 * np.sqrt(y + 1))
    variance = total * p * (1 - p) * 2 * total / (1 + total)
    assert np.allclose(draws.var(axis=0), variance, rtol=0.02, atol=1e-12)


@pytest.mark.parametrize("mechanism", ["md", "pg"])
def test_the_mechanisms_tend_to_the_reference_as_epsilon_grows(mechanism):
    """At a large epsilon (a, alpha -> 0) a mechanism's draws have the reference's mean
    and variance; at a small one they do not (the test can fail)."""
    from dpcounts.privacy.calibrate import calibrate
    from dpcounts.sampling.study_mode import StudySampler

    y = np.array([30, 5, 0, 60, 12, 9])
    population = np.array([1000.0, 800, 900, 2000, 700, 500])
    prior = np.full(y.size, y.sum() / population.sum())
    rng = np.random.default_rng(3)
    reference = no_privacy_draws(y, 20_000, rng)

    def moments(epsilon):
        cal = calibrate(mechanism, epsilon, int(y.sum()), population, prior, method="certified")
        draws = StudySampler(y, cal).draw(20_000, rng)
        return draws.mean(axis=0), draws.var(axis=0)

    mean, var = moments(200.0)
    np.testing.assert_allclose(mean, reference.mean(axis=0), atol=0.3)
    np.testing.assert_allclose(var, reference.var(axis=0), rtol=0.08, atol=0.05)
    mean, var = moments(0.05)
    assert np.abs(mean - y).max() > 5  # far from the truth where privacy dominates


def test_bad_counts_are_refused():
    rng = np.random.default_rng(0)
    for y, match in (([], "non-empty"), ([1, -1], "non-negative"), ([0.5, 1], "whole"),
                     ([0, 0], "positive total")):  # fmt: skip
        with pytest.raises(ValueError, match=match):
            no_privacy_draws(np.array(y), 2, rng)


def test_mostly_empty_tables_are_drawn_as_the_whole_table_draws_them():
    """Drawing only the strata with events (a national table is mostly empty) gives the
    tables, and leaves the stream, exactly as drawing every stratum did."""

    def every_stratum(y, n, rng):
        weights = rng.standard_gamma(y.astype(float), size=(n, y.size))
        weights /= weights.sum(axis=1, keepdims=True)
        return rng.multinomial(int(y.sum()), weights).astype(np.int64)

    rng = np.random.default_rng(0)
    for seed in range(200):
        k = int(rng.integers(1, 300))
        y = rng.integers(0, 5, k) * (rng.random(k) < rng.random())
        if y.sum() == 0:
            y[rng.integers(0, k)] = 1
        for n in (1, 3):
            mine, theirs = np.random.default_rng(seed), np.random.default_rng(seed)
            assert np.array_equal(no_privacy_draws(y, n, mine), every_stratum(y, n, theirs))
            assert mine.random() == theirs.random()


def test_batches_at_the_drawn_strata_are_the_tables_there():
    """``reference_batches(at=drawn_strata(y))`` gives the very tables at those strata from
    the same stream, and the tables are zero everywhere else."""
    rng = np.random.default_rng(3)
    for seed in range(50):
        k = int(rng.integers(2, 400))
        y = rng.integers(0, 4, k) * (rng.random(k) < rng.random())
        y[rng.integers(0, k)] += 1
        at = drawn_strata(y)
        whole = np.vstack(list(reference_batches(y, 5, np.random.default_rng(seed), 3 * k)))
        there = np.vstack(list(reference_batches(y, 5, np.random.default_rng(seed), 3 * k, at=at)))
        assert np.array_equal(whole[:, at], there)
        assert not np.delete(whole, at, axis=1).any()
        assert not np.delete(y, at).any()
