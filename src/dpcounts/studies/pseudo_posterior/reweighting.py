"""Algorithm 3 of Hu et al. (2020): raise the weights of records below the maximum bound.

The seed's equation (4) was lost in extraction; its prose fixes the ingredients: the
overall bound Delta, record i's bound L_i, its weight alpha_i, and a constant chosen so the
maximum bound is unchanged. We use

    alpha_i^final = min(1, alpha_i + k (Delta - L_i) / Delta),

which leaves a record at the maximum untouched and raises the others in proportion to
their slack. With B_i = L_i / alpha_i the record's unweighted bound on the same draws,
record i's new bound is L_i + k B_i (Delta - L_i) / Delta, which stays at most Delta for
every record exactly when k <= Delta / B_i; the largest such constant is

    k = Delta / max_i B_i  (over records with L_i < Delta).

So on the draws it was computed from, no record bound rises above Delta and the record
attaining Delta keeps it. The refit posterior moves a little, so the new Delta is checked
after refitting (``equal_privacy``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Reweighting:
    weights: np.ndarray  # alpha^final
    constant: float  # k
    bounds_after: np.ndarray  # predicted record bounds on the same draws


def reweight(weights: np.ndarray, unweighted_bounds: np.ndarray, delta: float) -> Reweighting:
    """Re-weight ``weights`` whose records have unweighted bounds B_i, at overall bound Delta."""
    weights = np.asarray(weights, dtype=float)
    unweighted_bounds = np.asarray(unweighted_bounds, dtype=float)
    if weights.shape != unweighted_bounds.shape or weights.ndim != 1:
        raise ValueError("weights and unweighted_bounds must be vectors of the same length")
    if not delta > 0:
        raise ValueError(f"delta must be positive, got {delta!r}")
    bounds = weights * unweighted_bounds
    slack = np.clip(1.0 - bounds / delta, 0.0, None)
    below = slack > 0
    if not np.any(below):
        return Reweighting(weights.copy(), 0.0, bounds)
    largest = unweighted_bounds[below].max()
    if largest == 0:  # every record below the maximum has log-likelihood 0: no risk at all
        new = np.where(below, 1.0, weights)
        return Reweighting(new, float("inf"), new * unweighted_bounds)
    constant = float(delta / largest)
    new = np.clip(weights + constant * slack, 0.0, 1.0)
    return Reweighting(new, constant, new * unweighted_bounds)
