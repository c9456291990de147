"""One small real NumPyro fit of the weighted Poisson synthesizer."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from dpsynth.pseudo_posterior.fitting import MCMCSettings, fit_weighted

SETTINGS = MCMCSettings(chains=2, warmup=500, samples=1500)


@pytest.fixture(scope="module")
def counts():
    return np.random.default_rng(11).poisson(50, size=200)


@pytest.fixture(scope="module")
def full_fit(counts):
    return fit_weighted(counts, np.ones(counts.size), "poisson", SETTINGS, np.random.default_rng(5))


def test_posterior_of_the_mean_matches_the_conjugate_answer(full_fit, counts):
    mu = full_fit.draws["mu"]
    assert mu.size == SETTINGS.chains * SETTINGS.samples
    # flat-ish prior: the posterior is close to Gamma(sum y, n), mean ybar, sd sqrt(ybar / n)
    sd = np.sqrt(counts.mean() / counts.size)
    assert abs(mu.mean() - counts.mean()) < 0.5 * sd
    assert mu.std() == pytest.approx(sd, rel=0.15)
    assert max(full_fit.rhat.values()) < 1.05


def test_record_loglik_of_every_draw_is_kept(full_fit, counts):
    expected = stats.poisson.logpmf(counts[None, :], full_fit.draws["mu"][:, None])
    assert full_fit.loglik.shape == (full_fit.draws["mu"].size, counts.size)
    np.testing.assert_allclose(full_fit.loglik, expected)
    np.testing.assert_allclose(full_fit.weighted_loglik, full_fit.loglik)


def test_halving_every_weight_widens_the_posterior_by_root_two(full_fit, counts):
    half = fit_weighted(
        counts, np.full(counts.size, 0.5), "poisson", SETTINGS, np.random.default_rng(6)
    )
    ratio = half.draws["mu"].std() / full_fit.draws["mu"].std()
    assert ratio == pytest.approx(np.sqrt(2), rel=0.15)


def test_same_seed_same_draws(full_fit, counts):
    again = fit_weighted(
        counts, np.ones(counts.size), "poisson", SETTINGS, np.random.default_rng(5)
    )
    np.testing.assert_array_equal(again.draws["mu"], full_fit.draws["mu"])


def test_bad_weights_are_rejected(counts):
    with pytest.raises(ValueError, match="weights"):
        fit_weighted(
            counts, np.full(counts.size, 1.5), "poisson", SETTINGS, np.random.default_rng(0)
        )
