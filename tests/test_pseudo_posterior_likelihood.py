"""The pseudo-posterior's log pmfs equal scipy.stats's, to the bit (they are computed
without importing scipy.stats)."""

import numpy as np
from scipy import stats

from dpcounts.studies.pseudo_posterior.likelihood import nbinom_logpmf, poisson_logpmf

# counts on and off the support (negative, fractional, NaN) and large ones
K = np.array([0, 1, 2, 3, 7, 30, 250, 4000, 1e6, -1, 2.5, np.nan])[None, :]


def parameters(rng, size):
    """Positive values over many magnitudes, and the edges and invalid values."""
    good = 10 ** rng.uniform(-6, 6, size)
    edges = np.array([0.0, 1.0, np.inf, -1e-300, -2.0, np.nan])
    return np.concatenate([good, edges])[:, None]


def test_poisson_logpmf_is_scipys_to_the_bit():
    mu = parameters(np.random.default_rng(1), 500)
    with np.errstate(invalid="ignore"):  # scipy's own inf - inf at mu = inf
        theirs = stats.poisson.logpmf(K, mu)
    np.testing.assert_array_equal(poisson_logpmf(K, mu), theirs)


def test_nbinom_logpmf_is_scipys_to_the_bit():
    rng = np.random.default_rng(2)
    n = parameters(rng, 200)
    for p in (rng.uniform(0, 1, (206, 1)), np.array([0.0, 1e-12, 0.5, 1.0, 1.5, -0.1, np.nan])):
        ours = nbinom_logpmf(K[..., None], n[..., None], p.reshape(1, 1, -1))
        with np.errstate(invalid="ignore"):  # scipy's own inf - inf, 0 x inf
            theirs = stats.nbinom.logpmf(K[..., None], n[..., None], p.reshape(1, 1, -1))
        np.testing.assert_array_equal(ours, theirs)
