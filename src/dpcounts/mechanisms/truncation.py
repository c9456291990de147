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
    codes = None
    if expected.size > DISTINCT_FROM:  # a national table repeats its expected counts:
        import pandas as pd  # each distinct one once, for both bounds (one factorisation)

        codes, distinct = pd.factorize(expected)
        if distinct.size < expected.size // 2:
            expected = np.asarray(distinct, dtype=float)
        else:
            codes = None
    lower = poisson_quantile(tail / 2.0, expected / inflation)
    upper = poisson_quantile(1.0 - tail / 2.0, expected * inflation)
    if codes is not None:
        lower, upper = lower[codes], upper[codes]
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


#: A cell whose quantile's continuous root (see :func:`poisson_quantile`) lies within
#: ROOT_MARGIN * max(1, k) of the integer k - 1 below it is left to scipy's root finder.
ROOT_MARGIN = 1e-4
#: Steps from the first guess after which the cells left are left to scipy.
MAX_STEPS = 64
#: Means beyond which :func:`poisson_quantile` computes each distinct mean once (a
#: national table of 10M strata has about 10^5 distinct expected counts).
DISTINCT_FROM = 100_000


def poisson_quantile(q: float, mean) -> np.ndarray:
    """``scipy.stats.poisson.ppf(q, mean)``, to the bit, without scipy's slow root finder
    (5 to 15 times faster on a national table's million cells).

    scipy returns ``v = ceil(pdtrik(q, mean))``, or ``v - 1`` when ``pdtr(v - 1, mean) >=
    q``: the root s of the continuous cdf ``gammaincc(s + 1, mean) = q`` (found by
    cdflib's root finder, ``pdtrik``, the slow part), then one step back. That is the
    smallest k with ``pdtr(k, mean) >= q`` whenever pdtrik lands in (k - 1, k + 1]: here
    that k is found with ``pdtr`` alone (a Cornish-Fisher guess, then steps), and the
    cells whose root lies within :data:`ROOT_MARGIN` * max(1, k) above k - 1, where
    pdtrik's error might take it to k - 1 or below, are computed as scipy computes them
    (:func:`_root_quantile`). A root
    further from k - 1 is not moved past it by the root finder's error (the tests pass
    with a margin of 1e-14), and a root near k is corrected by scipy's own step back,
    which calls the same ``pdtr``; ``tests/test_truncation_quantile.py`` checks both
    against scipy, on random means and on means put at and around every integer's root.
    Outside ``0 < q < 1`` and a 1-D array of finite positive means, scipy computes it all.
    """
    # Imported here: scipy takes about a second to import, and most jobs never build
    # truncation bounds; scipy.stats (another second) only where scipy computes it all
    from scipy import special

    mean = np.asarray(mean, dtype=float)
    if mean.ndim != 1 or not (0.0 < q < 1.0) or not np.all(np.isfinite(mean) & (mean > 0)):
        from scipy import stats

        return stats.poisson.ppf(q, mean)
    if mean.size > DISTINCT_FROM:  # a national table repeats its means: each computed once
        import pandas as pd

        codes, distinct = pd.factorize(mean)
        if distinct.size < mean.size // 2:
            return poisson_quantile(q, np.asarray(distinct, dtype=float))[codes]
    z = float(special.ndtri(q))
    k = np.maximum(np.floor(mean + z * np.sqrt(mean) + (z * z - 1.0) / 6.0), 0.0)
    left = np.zeros(mean.shape, dtype=bool)  # cells for scipy
    up = np.flatnonzero(special.pdtr(k, mean) < q)  # k too small: step up
    for _ in range(MAX_STEPS):
        if not up.size:
            break
        k[up] += 1.0
        up = up[special.pdtr(k[up], mean[up]) < q]
    left[up] = True
    down = np.flatnonzero(k > 0)  # k too large: step down (pdtr(-1) would be an error)
    down = down[special.pdtr(k[down] - 1.0, mean[down]) >= q]
    for _ in range(MAX_STEPS):
        if not down.size:
            break
        k[down] -= 1.0
        down = down[(k[down] > 0) & (special.pdtr(k[down] - 1.0, mean[down]) >= q)]
    left[down] = True
    # the root s in (k - 1, k]: too close above k - 1 when gammaincc(k - 1 + eps + 1) >= q
    near = np.flatnonzero(k > 0)
    eps = ROOT_MARGIN * np.maximum(k[near], 1.0)
    left[near[special.gammaincc(k[near] + eps, mean[near]) >= q]] = True
    if left.any():
        k[left] = _root_quantile(q, mean[left])
    return k


def _root_quantile(q: float, mean: np.ndarray) -> np.ndarray:
    """``scipy.stats.poisson.ppf(q, mean)`` for ``0 < q < 1`` and finite positive means,
    as scipy computes it there (``poisson._ppf``: the root finder, then one step back),
    without importing scipy.stats (a second, most of a small release's checks)."""
    from scipy import special

    vals = np.ceil(special.pdtrik(q, mean))
    vals1 = np.maximum(vals - 1, 0)
    return np.where(special.pdtr(vals1, mean) >= q, vals1, vals) + 0.0


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
