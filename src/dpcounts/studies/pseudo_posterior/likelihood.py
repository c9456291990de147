"""Record-level log-likelihoods and posterior-predictive draws, in NumPy (no JAX needed).

Parameterisations match ``models``: Poisson(mu), and NB with mean mu and size phi
(variance mu + mu^2 / phi).
"""

from __future__ import annotations

import numpy as np
from scipy import special

FAMILIES = ("poisson", "negbin")


def check_family(family: str) -> str:
    if family not in FAMILIES:
        raise ValueError(f"family must be one of {FAMILIES}, got {family!r}")
    return family


def parameter_names(family: str) -> tuple[str, ...]:
    return ("mu",) if check_family(family) == "poisson" else ("mu", "phi")


def record_loglik(y: np.ndarray, draws: dict[str, np.ndarray], family: str) -> np.ndarray:
    """Unweighted log p(y_i | theta_s) for every draw s and record i: shape (S, n)."""
    check_family(family)
    # evaluated once per distinct count (a few hundred) and spread to the records
    counts, index = np.unique(np.asarray(y), return_inverse=True)
    counts = counts[None, :]
    mu = np.asarray(draws["mu"], dtype=float)[:, None]
    if family == "poisson":
        by_count = poisson_logpmf(counts, mu)
    else:
        phi = np.asarray(draws["phi"], dtype=float)[:, None]
        by_count = nbinom_logpmf(counts, phi, phi / (phi + mu))
    return by_count[:, index.reshape(-1)]


# scipy.stats's log pmfs, to the bit, without importing scipy.stats (most of a second of
# every pseudo-posterior job): the formulas of scipy.stats.poisson._logpmf and
# scipy.stats.nbinom._logpmf (scipy 1.17) on the same special functions, in the same
# order; -inf off the support (k not a non-negative integer) and NaN where the parameters
# are outside the family, as scipy.stats gives (tests/test_pseudo_posterior_likelihood.py
# compares them on random and edge arguments).
def _on_support(k, valid, logpmf) -> np.ndarray:
    k, valid, logpmf = np.broadcast_arrays(k, valid, logpmf)
    out = np.where((k >= 0) & (k == np.floor(k)), logpmf, -np.inf)
    out[~valid | np.isnan(k)] = np.nan
    return out


def poisson_logpmf(k, mu) -> np.ndarray:
    """``scipy.stats.poisson.logpmf(k, mu)``, to the bit."""
    k, mu = np.asarray(k, dtype=float), np.asarray(mu, dtype=float)
    with np.errstate(invalid="ignore"):
        return _on_support(k, mu >= 0, special.xlogy(k, mu) - special.gammaln(k + 1) - mu)


def nbinom_logpmf(k, n, p) -> np.ndarray:
    """``scipy.stats.nbinom.logpmf(k, n, p)``, to the bit."""
    k, n, p = (np.asarray(x, dtype=float) for x in (k, n, p))
    with np.errstate(invalid="ignore", divide="ignore"):
        coeff = special.gammaln(n + k) - special.gammaln(k + 1) - special.gammaln(n)
        logpmf = coeff + n * np.log(p) + special.xlog1py(k, -p)
    return _on_support(k, (n > 0) & (p > 0) & (p <= 1), logpmf)


def sample_records(
    draws: dict[str, np.ndarray], index: np.ndarray, size: int, family: str, rng
) -> np.ndarray:
    """``size`` counts from p(. | theta_s) for each draw s in ``index``: (len(index), size)."""
    check_family(family)
    mu = np.asarray(draws["mu"], dtype=float)[index][:, None]
    shape = (len(index), size)
    if family == "poisson":
        return rng.poisson(mu, size=shape)
    phi = np.asarray(draws["phi"], dtype=float)[index][:, None]
    return rng.negative_binomial(phi, phi / (phi + mu), size=shape)
