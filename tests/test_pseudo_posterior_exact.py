"""Exact conjugate draws of the weighted Poisson pseudo posterior, and NUTS on the same model."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import special, stats

from dpcounts.studies.pseudo_posterior.conjugate import (
    MU_PRIOR_RATE,
    MU_PRIOR_SHAPE,
    poisson_pseudo_posterior,
)
from dpcounts.studies.pseudo_posterior.fitting import (
    ConvergenceError,
    ConvergenceThresholds,
    MCMCSettings,
    check_convergence,
    fit_method,
    fit_weighted,
)
from dpcounts.studies.pseudo_posterior.study import SynthesizerFit
from dpcounts.studies.pseudo_posterior.tables import (
    draws_table,
    fit_metadata,
    load_fits,
    records_table,
)

SETTINGS = MCMCSettings(chains=4, warmup=500, samples=1000)


@pytest.fixture(scope="module")
def data():
    y = np.random.default_rng(21).poisson(50, size=200)
    weights = np.random.default_rng(22).uniform(0.2, 1.0, size=y.size)
    return y, weights


@pytest.fixture(scope="module")
def exact(data):
    return fit_weighted(*data, "poisson", SETTINGS, np.random.default_rng(3))


def conjugate(y, weights):
    shape = MU_PRIOR_SHAPE + np.sum(weights * y)
    rate = MU_PRIOR_RATE + np.sum(weights)
    return stats.gamma(shape, scale=1.0 / rate)


def test_gamma_prior_matches_the_former_normal_prior_on_log_mu():
    # log of a Gamma(a, b) variable: mean digamma(a) - log b, variance trigamma(a)
    assert special.digamma(MU_PRIOR_SHAPE) - np.log(MU_PRIOR_RATE) == pytest.approx(0, abs=0.05)
    assert np.sqrt(special.polygamma(1, MU_PRIOR_SHAPE)) == pytest.approx(10, rel=0.01)


def test_poisson_fits_are_exact_by_default_and_negbin_fits_use_nuts():
    assert fit_method("poisson") == "exact"
    assert fit_method("poisson", "nuts") == "nuts"
    assert fit_method("negbin") == "nuts"
    with pytest.raises(ValueError, match="not conjugate"):
        fit_method("negbin", "exact")
    with pytest.raises(ValueError, match="method must be one of"):
        fit_method("poisson", "gibbs")


def test_exact_draws_follow_the_conjugate_pseudo_posterior(exact, data):
    y, weights = data
    target = conjugate(y, weights)
    assert poisson_pseudo_posterior(y, weights) == pytest.approx(
        (target.args[0], 1.0 / target.kwds["scale"])
    )
    mu = exact.draws["mu"]
    assert exact.sampler == "exact"
    assert mu.size == SETTINGS.chains * SETTINGS.samples
    assert stats.kstest(mu, target.cdf).pvalue > 0.01
    assert abs(mu.mean() - target.mean()) < 4 * target.std() / np.sqrt(mu.size)
    assert mu.std() == pytest.approx(target.std(), rel=4 / np.sqrt(2 * mu.size))


def test_zero_weights_leave_the_prior(data):
    y, _ = data
    fit = fit_weighted(y, np.zeros(y.size), "poisson", SETTINGS, np.random.default_rng(4))
    prior = stats.gamma(MU_PRIOR_SHAPE, scale=1.0 / MU_PRIOR_RATE)
    assert stats.kstest(fit.draws["mu"], prior.cdf).pvalue > 0.01


def test_exact_draws_keep_record_logliks_and_report_independent_diagnostics(exact, data):
    y, weights = data
    expected = stats.poisson.logpmf(y[None, :], exact.draws["mu"][:, None])
    np.testing.assert_allclose(exact.loglik, expected)
    np.testing.assert_allclose(exact.weighted_loglik, weights[None, :] * expected)
    assert exact.rhat == {"mu": 1.0}
    assert exact.ess == {"mu": float(SETTINGS.chains * SETTINGS.samples)}
    check_convergence(exact, ConvergenceThresholds(), "LW")  # passes at the defaults
    with pytest.raises(ConvergenceError, match="exact draws of LW .*min_ess"):
        check_convergence(exact, ConvergenceThresholds(min_ess=10**5), "LW")


def test_exact_draws_are_reproducible_from_the_callers_generator(exact, data):
    again = fit_weighted(*data, "poisson", SETTINGS, np.random.default_rng(3))
    np.testing.assert_array_equal(again.draws["mu"], exact.draws["mu"])
    other = fit_weighted(*data, "poisson", SETTINGS, np.random.default_rng(30))
    assert not np.array_equal(other.draws["mu"], exact.draws["mu"])


def test_saved_tables_keep_how_the_draws_were_made(exact):
    fits = {"LW": SynthesizerFit.from_fit("LW", exact, 0.95)}
    metadata = fit_metadata(fits)
    assert metadata["LW"]["sampler"] == "exact"
    loaded = load_fits(draws_table(fits), records_table(fits), metadata)["LW"]
    assert loaded.sampler == "exact"
    np.testing.assert_array_equal(loaded.draws["mu"], exact.draws["mu"])


@pytest.mark.slow
def test_nuts_on_the_same_model_agrees_with_the_exact_draws(exact, data):
    """NUTS samples the same model (same gamma prior): equal mean and sd within MC error."""
    nuts = fit_weighted(*data, "poisson", SETTINGS, np.random.default_rng(5), method="nuts")
    assert nuts.sampler == "nuts"
    check_convergence(nuts, ConvergenceThresholds(), "nuts")
    target = conjugate(*data)
    a, b = exact.draws["mu"], nuts.draws["mu"]
    ess = nuts.ess["mu"]
    mc_error = target.std() * np.sqrt(1 / a.size + 1 / ess)
    assert abs(a.mean() - b.mean()) < 4 * mc_error
    assert abs(b.mean() - target.mean()) < 4 * target.std() / np.sqrt(ess)
    # sd of a sample sd is about sd / sqrt(2 ESS)
    sd_error = target.std() * np.sqrt(1 / (2 * a.size) + 1 / (2 * ess))
    assert abs(a.std() - b.std()) < 4 * sd_error
