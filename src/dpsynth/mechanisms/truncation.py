"""Prior predictive truncation bounds of the truncated Poisson-gamma mechanism.

Quick (2022), eq (8): each synthetic count z_i is restricted to ``[L_i, U_i]``, the Poisson
quantiles of the prior expected count ``n_i * lambda0_i`` at ``tail/2`` and
``1 - tail/2``. The inflation factor ``xi >= 1`` (Quick 2022, Section 2.3) widens them: L uses the
mean ``n_i lambda0_i / xi`` and U the mean ``xi n_i lambda0_i``. The bounds use public
inputs only (populations, prior rates, the total), so they can be published.
"""

from __future__ import annotations

import numpy as np


def default_tail(n_cells: int) -> float:
    """The paper's rule of thumb ``min(0.001, 1/I)`` (Quick (2022) below eq 8)."""
    if n_cells < 1:
        raise ValueError(f"n_cells must be a positive integer, got {n_cells!r}")
    return min(0.001, 1.0 / n_cells)


def truncation_bounds(
    expected, total: int, tail: float | None = None, inflation: float = 1.0
) -> tuple[np.ndarray, np.ndarray]:
    """Integer bounds ``(L, U)`` of Quick (2022), eq (8) for prior expected counts ``n * lambda0``.

    ``U`` is capped at ``total`` (no count can exceed the public total). Raises when the
    bounds cannot hold a vector with the given total (``sum L > total`` or ``sum U < total``):
    the truncated mechanism would then have an empty support.
    """
    expected = np.asarray(expected, dtype=float)
    if expected.ndim != 1 or expected.size < 2:
        raise ValueError("expected counts must be a 1-D array with at least two cells")
    if not np.all(np.isfinite(expected)) or np.any(expected <= 0):
        raise ValueError("expected counts n_i * lambda0_i must be finite and positive")
    if tail is None:
        tail = default_tail(expected.size)
    if not (0.0 < tail < 1.0):
        raise ValueError(f"tail must lie in (0, 1), got {tail!r}")
    if not (np.isfinite(inflation) and inflation >= 1.0):
        raise ValueError(f"inflation must be a finite number >= 1, got {inflation!r}")
    # Imported here: scipy.stats takes about a second to import, and most jobs never
    # build truncation bounds.
    from scipy import stats

    lower = stats.poisson.ppf(tail / 2.0, expected / inflation)
    upper = stats.poisson.ppf(1.0 - tail / 2.0, expected * inflation)
    if not (np.all(np.isfinite(lower)) and np.all(np.isfinite(upper))):
        raise ValueError(
            f"the Poisson quantiles of an expected count of {expected.max():.3g} cannot be "
            "computed (scipy's fail above about 1e10): the truncated mechanism needs every "
            "stratum's expected count below that; release a table of fewer events per stratum"
        )
    lower = lower.astype(np.int64)
    upper = np.minimum(upper, total).astype(np.int64)
    if lower.sum() > total:
        raise ValueError(
            f"infeasible truncation bounds: sum of lower bounds {lower.sum()} exceeds the "
            f"total {total}; use a smaller tail or a larger inflation"
        )
    if upper.sum() < total:
        raise ValueError(
            f"infeasible truncation bounds: sum of upper bounds {upper.sum()} is below the "
            f"total {total}; use a smaller tail or a larger inflation"
        )
    return lower, upper


def check_no_dominant_cell(expected) -> None:
    """Refuse inputs violating Quick (2022)'s assumption E[y_i] <= E[y_(i)] for every cell.

    The paper's appendix A.2 that handles a dominant cell is not available, so the paper
    calibration (eq 13) is only offered when no cell's prior expected count exceeds the
    sum of all the others (Theorem 1 of Quick (2022) states the assumption with <=).
    """
    expected = np.asarray(expected, dtype=float)
    others = expected.sum() - expected
    bad = np.flatnonzero(expected > others)
    if bad.size:
        raise ValueError(
            "the paper's truncated calibration assumes E[y_i] <= E[y_(i)] for every cell "
            f"(no dominant cell); violated by cell(s) {bad.tolist()[:10]}: use "
            "method='certified' or method='exact' instead"
        )
