"""The release's sanitised group prior: noise, floor, the single-group case, exact privacy."""

from __future__ import annotations

import dataclasses
import itertools
import math

import numpy as np
import pytest
from conftest import discrete_laplace_log_cdf
from scipy import stats

from dpcounts.privacy.discrete_laplace import discrete_laplace_log_pmf, scale_for
from dpcounts.privacy.sanitised_prior import SanitisedPrior, sanitised_group_prior


def test_fields_and_post_processing():
    counts = np.array([4, 6, 1, 9, 0, 3])
    groups = np.array(["PA", "PA", "NJ", "NJ", "NY", "NY"])
    pop = np.array([100.0, 200, 50, 400, 80, 90])
    prior = sanitised_group_prior(counts, groups, pop, 0.5, np.random.default_rng(2))
    assert isinstance(prior, SanitisedPrior)
    assert prior.labels.tolist() == ["NJ", "NY", "PA"]
    np.testing.assert_array_equal(prior.group_population, [450.0, 170.0, 300.0])
    assert prior.noisy_totals.dtype == np.int64
    np.testing.assert_array_equal(
        prior.group_rates, np.maximum(prior.noisy_totals, 0.5) / prior.group_population
    )
    np.testing.assert_array_equal(prior.rates, prior.group_rates[[2, 2, 0, 0, 1, 1]])
    assert prior.epsilon == 0.5 and prior.floor == 0.5
    with pytest.raises(dataclasses.FrozenInstanceError):
        prior.epsilon = 0.0
    with pytest.raises(ValueError):  # arrays are read-only
        prior.rates[0] = 1.0
    again = sanitised_group_prior(counts, groups, pop, 0.5, np.random.default_rng(2))
    np.testing.assert_array_equal(prior.noisy_totals, again.noisy_totals)


@pytest.mark.parametrize("epsilon_prior", [0.2, 1.0, 3.0])
def test_noise_is_discrete_laplace_with_sensitivity_two(epsilon_prior):
    # 40,000 groups of two strata each: noisy - true total is iid discrete Laplace(2/eps).
    rng = np.random.default_rng(17)
    n_groups = 40_000
    groups = np.repeat(np.arange(n_groups), 2)
    counts = rng.integers(0, 50, groups.size)
    pop = np.full(groups.size, 1000.0)
    prior = sanitised_group_prior(counts, groups, pop, epsilon_prior, rng)
    true = np.bincount(groups, weights=counts).astype(np.int64)
    noise = prior.noisy_totals - true
    assert np.any(noise != 0)
    scale = scale_for(epsilon_prior, 2)
    k = np.arange(-int(20 * float(scale)) - 2, int(20 * float(scale)) + 3)
    pmf = np.exp(discrete_laplace_log_pmf(k, scale))
    inner = k[pmf * n_groups >= 5]  # one bin per value; the two tails pooled
    lo, hi = inner.min(), inner.max()
    observed = [(noise < lo).sum(), *[(noise == v).sum() for v in inner], (noise > hi).sum()]
    tail = np.exp(discrete_laplace_log_cdf(lo - 1, scale))[0]  # P(e < lo) = P(e > hi)
    expected = np.array([tail, *np.exp(discrete_laplace_log_pmf(inner, scale)), tail])
    assert expected.sum() == pytest.approx(1.0, rel=1e-9)
    assert stats.chisquare(observed, expected / expected.sum() * n_groups).pvalue > 1e-3


def test_floor_keeps_rates_positive():
    rng = np.random.default_rng(5)
    groups = np.arange(2000)
    counts = np.zeros(groups.size, dtype=np.int64)  # noise makes about half the totals <= 0
    pop = np.full(groups.size, 200.0)
    prior = sanitised_group_prior(counts, groups, pop, 0.5, rng, floor=2.0)
    low = prior.noisy_totals < 2
    assert low.sum() > 500 and (~low).sum() > 100
    np.testing.assert_array_equal(prior.group_rates[low], 2.0 / 200.0)
    np.testing.assert_array_equal(prior.group_rates[~low], prior.noisy_totals[~low] / 200.0)
    assert np.all(prior.rates > 0) and prior.floor == 2.0
    with pytest.raises(ValueError, match="floor"):
        sanitised_group_prior(counts, groups, pop, 0.5, rng, floor=0.0)


def test_single_group_is_released_exactly_without_budget():
    counts = np.array([3, 0, 7, 2])
    pop = np.array([100.0, 50.0, 300.0, 50.0])
    rng = np.random.default_rng(1)
    state = rng.bit_generator.state
    prior = sanitised_group_prior(counts, np.array(["all"] * 4), pop, 0.0, rng)
    assert rng.bit_generator.state == state  # no randomness used
    np.testing.assert_array_equal(prior.noisy_totals, [12])
    assert prior.epsilon == 0.0
    np.testing.assert_allclose(prior.rates, 12 / 500.0)
    # a budget offered for it is not spent
    assert sanitised_group_prior(counts, np.zeros(4), pop, 0.7, rng).epsilon == 0.0
    # a total of 0 is floored like any other (rate 0 is no gamma prior)
    zero = sanitised_group_prior(np.zeros(4, dtype=int), np.zeros(4), pop, 0.0, rng)
    np.testing.assert_allclose(zero.group_rates, 0.5 / 500.0)


def test_input_checks():
    counts, groups, pop = np.array([1, 2]), np.array([0, 1]), np.array([10.0, 10.0])
    rng = np.random.default_rng(0)
    for bad in (0.0, -1.0, math.nan, math.inf):
        with pytest.raises(ValueError, match="epsilon_prior"):
            sanitised_group_prior(counts, groups, pop, bad, rng)
    with pytest.raises(ValueError, match="non-negative"):
        sanitised_group_prior(np.array([-1, 2]), groups, pop, 1.0, rng)
    with pytest.raises(ValueError, match="integers"):
        sanitised_group_prior(np.array([1.5, 2.0]), groups, pop, 1.0, rng)
    with pytest.raises(ValueError, match="population"):
        sanitised_group_prior(counts, groups, np.array([0.0, 10.0]), 1.0, rng)
    with pytest.raises(ValueError, match="same length"):
        sanitised_group_prior(counts, np.array([0]), pop, 1.0, rng)


def _datasets(n_strata: int, total: int):
    for cut in itertools.combinations(range(total + n_strata - 1), n_strata - 1):
        bars = (-1, *cut, total + n_strata - 1)
        yield np.array([bars[i + 1] - bars[i] - 1 for i in range(n_strata)])


@pytest.mark.parametrize("epsilon_prior", [0.25, 1.0, 2.5])
def test_exact_privacy_of_the_released_totals_and_rates(epsilon_prior):
    # Every dataset of 5 strata in 3 groups with total 4, every neighbour (one event moved),
    # every output in a window of noisy totals: |log p(v | y) - log p(v | x)| <= eps_prior,
    # attained when the event changes group. The same holds for the floored rates, whose
    # law is computed exactly (all noisy totals below the floor give the same rate).
    groups = np.array([0, 0, 1, 2, 2])
    scale = scale_for(epsilon_prior, 2)
    window = np.arange(-6, 11)
    worst_totals = worst_rates = 0.0
    for y in _datasets(5, 4):
        t_y = np.bincount(groups, weights=y, minlength=3).astype(int)
        for i, j in itertools.permutations(range(5), 2):
            if y[i] == 0:
                continue
            x = y.copy()
            x[i] -= 1
            x[j] += 1
            t_x = np.bincount(groups, weights=x, minlength=3).astype(int)
            # noisy totals: product over groups, every output v in window^3
            per_group = [
                discrete_laplace_log_pmf(window - t_y[g], scale)
                - discrete_laplace_log_pmf(window - t_x[g], scale)
                for g in range(3)
            ]
            loss = np.abs(sum(np.meshgrid(*per_group, indexing="ij")))
            worst_totals = max(worst_totals, float(loss.max()))
            if groups[i] == groups[j]:
                assert loss.max() == 0.0
            # floored rates (floor 0.5): outputs "floor" (noisy <= 0) or v = 1, 2, ...
            rate_loss = []
            for g in range(3):
                floor_y = discrete_laplace_log_cdf(-t_y[g], scale)[0]
                floor_x = discrete_laplace_log_cdf(-t_x[g], scale)[0]
                above = np.arange(1, 11)
                rate_loss.append(
                    np.concatenate(
                        [
                            [floor_y - floor_x],
                            discrete_laplace_log_pmf(above - t_y[g], scale)
                            - discrete_laplace_log_pmf(above - t_x[g], scale),
                        ]
                    )
                )
            loss = np.abs(sum(np.meshgrid(*rate_loss, indexing="ij")))
            worst_rates = max(worst_rates, float(loss.max()))
    assert worst_totals <= epsilon_prior + 1e-12
    assert worst_totals == pytest.approx(epsilon_prior, rel=1e-12)  # tight
    assert worst_rates <= epsilon_prior + 1e-12


def test_single_group_needs_no_noise_exactly():
    # With one group the released total equals y., identical for y and every neighbour x.
    groups = np.zeros(3)
    pop = np.array([10.0, 20.0, 30.0])
    for y in _datasets(3, 5):
        for i, j in itertools.permutations(range(3), 2):
            if y[i] == 0:
                continue
            x = y.copy()
            x[i] -= 1
            x[j] += 1
            py = sanitised_group_prior(y, groups, pop, 0.0, np.random.default_rng(0))
            px = sanitised_group_prior(x, groups, pop, 0.0, np.random.default_rng(1))
            np.testing.assert_array_equal(py.noisy_totals, px.noisy_totals)
            np.testing.assert_array_equal(py.rates, px.rates)
