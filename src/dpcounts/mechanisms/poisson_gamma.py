"""Poisson-gamma (PG) mechanism of Quick (2021) and its truncated variant (Quick 2022).

y_i | lambda_i ~ Pois(n_i lambda_i), lambda_i ~ Gamma(a_i, b_i) with b_i = a_i / lambda0_i
(Quick (2021), eq 6), so the prior mean of lambda_i is the public prior rate lambda0_i. The
posterior predictive of one cell is NB(y_i + a_i, p_i), p_i = n_i / (b_i + 2 n_i)
(Quick (2021), eq 8); the release is the product of these NBs conditioned on sum z = y.
This module holds the small shared pieces; the calibrations of ``a`` live in
``dpcounts.privacy``.
"""

from __future__ import annotations

import numpy as np

#: Kerman (2011), Quick (2022), Section 2.3: a_i > 1/3 where L_i = 0 keeps the posterior of
#: lambda_i from piling up at zero.
KERMAN_FLOOR = 1.0 / 3.0
#: Floor for the other truncated cells: keeps every gamma shape strictly positive. The
#: toy example of Quick (2022) reports "a_2 > 0.001", which suggests the same floor.
POSITIVE_FLOOR = 1e-3


def gamma_rates(a, prior_rate) -> np.ndarray:
    """Gamma rates ``b_i = a_i / lambda0_i``: the prior mean of lambda_i is lambda0_i."""
    return np.asarray(a, dtype=float) / np.asarray(prior_rate, dtype=float)


def truncated_shape_floor(lower) -> np.ndarray:
    """Per-cell floor on a: 1/3 where L_i = 0 (Kerman), a small positive value elsewhere."""
    lower = np.asarray(lower)
    return np.where(lower == 0, KERMAN_FLOOR, POSITIVE_FLOOR)
