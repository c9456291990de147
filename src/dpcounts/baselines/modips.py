"""MODIPS for the Poisson-gamma model: sanitise the sufficient statistic (Quick (2021), eq 18).

Liu (2016)'s model-based DP synthesis, extended to the PG model as Quick (2021), Section 4
suggests: the posterior Gamma(a_i + y_i, b_i + n_i) is replaced by

    lambda*_i ~ Gamma(a_i + f(y_i), b_i + n_i),  f(y_i) = y_i + e_i,

with e the two-sided geometric noise on the whole count vector (Delta = 2, all of eps is
spent there; see :mod:`dpcounts.baselines.geometric`). Everything after the noise is
post-processing: the shapes a_i + y_i + e_i are floored at ``SHAPE_FLOOR`` (a gamma shape
must be positive; the noise can make it negative) and synthetic counts are drawn from
Mult(y., pi*) with pi*_i = n_i lambda*_i / sum_j n_j lambda*_j, so the total is fixed.
"""

from __future__ import annotations

import numpy as np

from dpcounts.privacy.discrete_laplace import geometric_noise

SHAPE_FLOOR = 1e-3  # documented positive floor on a_i + y_i + e_i


def modips_release(
    y,
    epsilon: float,
    prior_shape,
    prior_rate,
    population,
    size: int,
    rng: np.random.Generator,
) -> np.ndarray:
    """``size`` synthetic count vectors (rows) from one eps-DP sanitised posterior.

    ``prior_shape`` a_i and ``prior_rate`` lambda0_i (b_i = a_i / lambda0_i) are public.
    One noise vector is drawn (the privacy cost is paid once); each row draws its own
    lambda* from the sanitised posterior and its own multinomial.
    """
    y = np.asarray(y)
    if y.ndim != 1 or np.any(y < 0):
        raise ValueError("y must be a 1-D array of non-negative counts")
    population = np.asarray(population, dtype=float)
    shape = np.broadcast_to(np.asarray(prior_shape, dtype=float), y.shape)
    rate0 = np.broadcast_to(np.asarray(prior_rate, dtype=float), y.shape)
    if population.shape != y.shape or np.any(population <= 0):
        raise ValueError("population must be positive, one value per cell of y")
    if np.any(shape <= 0) or np.any(rate0 <= 0):
        raise ValueError("prior_shape and prior_rate must be positive")
    noisy_shape = np.maximum(shape + y + geometric_noise(epsilon, y.size, rng), SHAPE_FLOOR)
    rate = shape / rate0 + population
    lam = rng.gamma(noisy_shape, 1.0 / rate, size=(size, y.size))
    weights = population * lam
    weights /= weights.sum(axis=1, keepdims=True)
    total = int(y.sum())
    return np.stack([rng.multinomial(total, w) for w in weights])
