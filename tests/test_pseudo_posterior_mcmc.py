"""Small real fits of the weighted synthesizers: Poisson exactly and with NUTS, NB with NUTS."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from dpcounts.studies.pseudo_posterior.fitting import (
    ConvergenceError,
    ConvergenceThresholds,
    MCMCSettings,
    check_convergence,
    fit_weighted,
)
from dpcounts.studies.pseudo_posterior.simulate import simulate_counts
from dpcounts.studies.pseudo_posterior.study import StudySettings, run_synthesizer

SETTINGS = MCMCSettings(chains=2, warmup=500, samples=1500)
NEGBIN = MCMCSettings(chains=2, warmup=200, samples=200)


@pytest.fixture(scope="module")
def counts():
    return np.random.default_rng(11).poisson(50, size=200)


# The Poisson pseudo posterior is conjugate: by default it is drawn exactly; "nuts" runs
# NUTS on the same model. Both must show the same properties.
@pytest.fixture(scope="module", params=["exact", pytest.param("nuts", marks=pytest.mark.slow)])
def method(request):
    return request.param


@pytest.fixture(scope="module")
def full_fit(counts, method):
    return fit_weighted(
        counts, np.ones(counts.size), "poisson", SETTINGS, np.random.default_rng(5), method
    )


def test_posterior_of_the_mean_matches_the_conjugate_answer(full_fit, counts, method):
    assert full_fit.sampler == method
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


def test_halving_every_weight_widens_the_posterior_by_root_two(full_fit, counts, method):
    half = fit_weighted(
        counts, np.full(counts.size, 0.5), "poisson", SETTINGS, np.random.default_rng(6), method
    )
    ratio = half.draws["mu"].std() / full_fit.draws["mu"].std()
    assert ratio == pytest.approx(np.sqrt(2), rel=0.15)


def test_same_seed_same_draws(full_fit, counts, method):
    again = fit_weighted(
        counts, np.ones(counts.size), "poisson", SETTINGS, np.random.default_rng(5), method
    )
    np.testing.assert_array_equal(again.draws["mu"], full_fit.draws["mu"])


def test_bad_weights_are_rejected(counts):
    with pytest.raises(ValueError, match="weights"):
        fit_weighted(
            counts, np.full(counts.size, 1.5), "poisson", SETTINGS, np.random.default_rng(0)
        )


@pytest.fixture(scope="module")
def overdispersed():
    components = [{"weight": 1.0, "mean": 20, "dispersion": 5}]
    return simulate_counts(200, components, np.random.default_rng(12))


@pytest.mark.slow
def test_negbin_is_fitted_by_nuts_and_passes_reachable_checks(overdispersed):
    y = overdispersed
    fit = fit_weighted(y, np.ones(y.size), "negbin", NEGBIN, np.random.default_rng(7))
    assert fit.sampler == "nuts"
    assert set(fit.draws) == {"mu", "phi"} and set(fit.rhat) == set(fit.ess) == {"mu", "phi"}
    assert fit.draws["mu"].size == NEGBIN.chains * NEGBIN.samples
    # posterior of the mean near the sample mean (sd of the mean: sqrt(var / n))
    assert abs(fit.draws["mu"].mean() - y.mean()) < 4 * np.sqrt(y.var() / y.size)
    assert 0 < min(fit.ess.values()) and max(fit.rhat.values()) < 1.1
    check_convergence(fit, ConvergenceThresholds(max_rhat=1.1, min_ess=50), "unweighted")


@pytest.mark.slow
def test_negbin_fit_with_impossible_checks_raises_convergence_error(overdispersed):
    settings = StudySettings(
        family="negbin",
        lipschitz_quantile=0.95,
        mcmc=NEGBIN,
        checks=ConvergenceThresholds(max_rhat=0.5, min_ess=10**6),
    )
    with pytest.raises(ConvergenceError, match="MCMC of unweighted did not converge") as error:
        run_synthesizer("unweighted", overdispersed, settings, {}, np.random.default_rng(8))
    assert "max_rhat" in str(error.value) and "min_ess" in str(error.value)
