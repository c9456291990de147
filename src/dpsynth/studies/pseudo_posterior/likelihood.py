"""Record-level log-likelihoods and posterior-predictive draws, in NumPy (no JAX needed).

Parameterisations match ``models``: Poisson(mu), and NB with mean mu and size phi
(variance mu + mu^2 / phi).
"""

from __future__ import annotations

import numpy as np
from scipy import stats

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
        by_count = stats.poisson.logpmf(counts, mu)
    else:
        phi = np.asarray(draws["phi"], dtype=float)[:, None]
        by_count = stats.nbinom.logpmf(counts, phi, phi / (phi + mu))
    return by_count[:, index.reshape(-1)]


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
