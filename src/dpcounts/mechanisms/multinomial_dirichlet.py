"""Multinomial-Dirichlet (MD) mechanism of Machanavajjhala et al. (2008).

theta | y ~ Dir(y + alpha), z ~ Mult(y., theta) (Quick (2021), eqs 2-5). The release is
eps-DP if and only if ``min alpha_i >= y. / (e^eps - 1)`` (Quick (2021), eq 5): the worst case
moves the single event of a cell with y_i = 1 and puts all y. synthetic events there.
"""

from __future__ import annotations

import numpy as np

#: Relative upward rounding of alpha (8 ulp).
ROUND_UP = 8 * 2.0**-53


def md_alpha(epsilon: float, total: int, n_cells: int) -> np.ndarray:
    """The smallest eps-DP Dirichlet alphas, ``y. / (e^eps - 1)`` for every cell (eq 5)."""
    if not (np.isfinite(epsilon) and epsilon > 0):
        raise ValueError(f"epsilon must be a finite positive number, got {epsilon!r}")
    if total <= 0:
        raise ValueError(f"total must be a positive integer, got {total!r}")
    with np.errstate(over="ignore"):  # alpha underflows to 0: calibrate refuses it
        alpha = total / np.expm1(epsilon)
    # Rounded up: the bound must hold for the real numbers, and expm1 and the division
    # each round (<= 1.5 ulp together); 8 ulp keeps alpha >= y./(e^eps - 1) exactly.
    return np.full(int(n_cells), alpha * (1.0 + ROUND_UP))
