"""The release samplers against brute-force enumeration of the exact pmf."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import chi_square_p_value, empirical
from scipy import integrate, stats

from dpcounts.calibration import Calibration
from dpcounts.sampling.enumeration import compositions, exact_pmf
from dpcounts.sampling.study_mode import StudySampler
from dpcounts.sampling.synthesize import synthesize

N_DRAWS = 20_000
# chi-square goodness of fit must not reject at this level; over the module's 10 such tests
# a correct sampler fails one with probability below 1e-3 (the draws' seeds are fixed)
P_VALUE_FLOOR = 1e-4


def pg(a, b, population, total, **bounds) -> Calibration:
    mechanism = "truncated" if bounds else "pg"
    return Calibration(
        mechanism=mechanism,
        method="paper",
        epsilon=1.0,
        total=total,
        a=a,
        b=b,
        population=population,
        **bounds,
    )


CASES = {
    "md I=3": (
        Calibration(mechanism="md", method="paper", epsilon=1.0, total=7, a=[0.6, 2.0, 1.3]),
        [2, 5, 0],
    ),
    "pg I=2 unequal b/n": (pg([2.0, 0.5], [200.0, 1.0], [100.0, 1000.0], 12), [3, 9]),
    "pg I=4": (
        pg([1.0, 3.0, 0.4, 2.0], [5.0, 1.0, 2.0, 40.0], [10.0, 50.0, 5.0, 80.0], 6),
        [0, 4, 1, 1],
    ),
    "truncated I=3": (
        pg(
            [1.5, 0.5, 2.0],
            [3.0, 0.2, 9.0],
            [30.0, 10.0, 60.0],
            9,
            lower=[1, 0, 2],
            upper=[5, 4, 7],
        ),
        [0, 8, 1],  # clamped to (1, 4, 2) inside
    ),
    "truncated I=4": (
        pg(
            [1.0, 1.0, 0.5, 3.0],
            [1.0, 4.0, 0.5, 2.0],
            [20.0, 20.0, 5.0, 40.0],
            8,
            lower=[0, 1, 0, 2],
            upper=[3, 4, 2, 6],
        ),
        [2, 2, 1, 3],
    ),
}


def mc_tv_scale(probs: np.ndarray, n: int) -> float:
    """Expected total variation of an n-draw empirical pmf from the truth (normal approx)."""
    return 0.5 * float(np.sum(np.sqrt(2 * probs * (1 - probs) / (np.pi * n))))


@pytest.mark.parametrize("name", list(CASES))
def test_tree_sampler_matches_enumeration(name):
    cal, y = CASES[name]
    support, probs = exact_pmf(y, cal)
    rng = np.random.default_rng(sum(map(ord, name)))
    draws = StudySampler(y, cal).draw(N_DRAWS, rng)
    counts = empirical(draws, support)
    tv = 0.5 * np.abs(counts / N_DRAWS - probs).sum()
    assert tv < 2 * mc_tv_scale(probs, N_DRAWS)
    assert chi_square_p_value(counts, probs) > P_VALUE_FLOOR


@pytest.mark.parametrize("name", list(CASES))
def test_synthesize_matches_enumeration(name):
    # synthesize dispatches md to the Dirichlet-multinomial route, the rest to the tree
    cal, y = CASES[name]
    support, probs = exact_pmf(y, cal)
    rng = np.random.default_rng(7 + sum(map(ord, name)))
    counts = empirical(synthesize(np.array(y), cal, N_DRAWS, rng), support)
    assert chi_square_p_value(counts, probs) > P_VALUE_FLOOR


def test_tree_marginals_equal_enumerated_marginals():
    for cal, y in CASES.values():
        support, probs = exact_pmf(y, cal)
        sampler = StudySampler(y, cal)
        for cell, (offset, pmf) in enumerate(sampler.marginal_pmfs()):
            values = offset + np.arange(pmf.size)
            truth = np.array([probs[support[:, cell] == v].sum() for v in values])
            np.testing.assert_allclose(pmf, truth, atol=1e-12)
            assert (
                probs[(support[:, cell] < values[0]) | (support[:, cell] > values[-1])].sum()
                < 1e-12
            )


def lambda_route_pmf(y, cal: Calibration) -> np.ndarray:
    """pmf of z_1 under Quick (2022), eq (7) for I = 2, by quadrature.

    lambda_k ~ Gamma(s_k, rate n_k + b_k), so n_k lambda_k = beta_k G_k with G_k ~ Gamma(s_k)
    and beta_k = n_k / (n_k + b_k); pi_1 = rho B / (1 - B + rho B) with B ~ Beta(s_1, s_2)
    and rho = beta_1 / beta_2; then z_1 ~ Binomial(y., pi_1).
    """
    shape = np.asarray(y) + cal.a
    beta = cal.population / (cal.population + cal.b)
    rho = beta[0] / beta[1]

    def integrand(b, k):
        pi = rho * b / (1 - b + rho * b)
        return stats.binom.pmf(k, cal.total, pi) * stats.beta.pdf(b, shape[0], shape[1])

    return np.array(
        [
            integrate.quad(integrand, 0, 1, args=(k,), epsabs=1e-13, limit=200)[0]
            for k in range(cal.total + 1)
        ]
    )


@pytest.mark.slow
def test_lambda_route_differs_from_the_release_when_b_over_n_differ():
    # Why the tree exists: gamma rates + one multinomial (Quick (2022), eq 7) integrates the rates
    # out *after* conditioning on the total, the mechanism analysed for privacy does it before.
    y, total = [10, 10], 20
    unequal = pg([0.5, 0.5], [100.0, 0.01], [10.0, 10.0], total)  # b/n: 10 vs 0.001
    support, exact = exact_pmf(y, unequal)
    route = lambda_route_pmf(y, unequal)
    assert route.sum() == pytest.approx(1.0, abs=1e-9)
    exact_z1 = np.array([exact[support[:, 0] == k].sum() for k in range(total + 1)])
    assert 0.5 * np.abs(route - exact_z1).sum() > 0.1
    # with b/n equal in both cells the two coincide (both are the Dirichlet-multinomial)
    equal = pg([0.5, 0.5], [1.0, 100.0], [10.0, 1000.0], total)
    support, exact = exact_pmf(y, equal)
    exact_z1 = np.array([exact[support[:, 0] == k].sum() for k in range(total + 1)])
    np.testing.assert_allclose(lambda_route_pmf(y, equal), exact_z1, atol=1e-9)


def test_enumerated_support_is_complete():
    lower, upper = np.array([0, 1, 2]), np.array([3, 5, 4])
    rows = compositions(7, lower, upper)
    brute = [(i, j, 7 - i - j) for i in range(4) for j in range(1, 6) if 2 <= 7 - i - j <= 4]
    assert sorted(map(tuple, rows.tolist())) == sorted(brute)


def test_nbinom_window_is_scipy_stats_to_the_bit():
    """The untruncated leaves' windows (ppf, isf and the cdf at the total) without
    scipy.stats: scipy.stats.nbinom's numbers to the bit, on random parameters over the
    range a study's tilted cells take and on edge ones (success exactly 1, invalid
    parameters giving NaN)."""
    from dpcounts.sampling.tilt import nbinom_window

    rng = np.random.default_rng(8)
    shape = np.concatenate([10.0 ** rng.uniform(-2, 4, 400), [0.5, 3.0, 0.0, -1.0, 2.0]])
    success = np.concatenate([10.0 ** rng.uniform(-3, 0, 400), [1.0, 0.3, 0.3, 0.3, 1.5]])
    for q in (1e-13, 1e-3):
        for total in (0, 7, 1234):
            ours = nbinom_window(q, shape, success, total)
            theirs = (stats.nbinom.ppf(q, shape, success), stats.nbinom.isf(q, shape, success),
                      stats.nbinom.cdf(total, shape, success))  # fmt: skip
            for a, b in zip(ours, theirs, strict=True):
                assert np.array_equal(np.isnan(a), np.isnan(b))
                assert np.array_equal(
                    a[~np.isnan(a)].view(np.int64), b[~np.isnan(b)].view(np.int64)
                )
