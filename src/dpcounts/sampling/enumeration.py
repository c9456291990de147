"""Brute-force enumeration of the conditioned product, for small instances only.

The released vector z of every mechanism in dpcounts has the pmf

    q(z | y) = prod_k w_k(z_k) / normaliser,   sum z = y.,  L_k <= z_k <= U_k,
    w_k(z) = Gamma(z + ~y_k + a_k) / (Gamma(~y_k + a_k) z!) * p_k^z,

with ~y = ``cal.clamp(y)``, ``(L, U) = cal.bounds()`` and ``log p = cal.log_success()``.
This module lists the support and evaluates ``log q`` exactly (log-sum-exp over the whole
support). The exact audit and the sampler tests are built on it.
"""

from __future__ import annotations

import numpy as np
from scipy.special import gammaln, logsumexp

from dpcounts.calibration import Calibration


def count_compositions(total: int, lower, upper) -> int:
    """Number of integer vectors z with sum ``total`` and ``lower <= z <= upper``.

    Exact (Python integers), by convolving the cells' indicator polynomials, so it can be
    used to size an enumeration before starting it.
    """
    lower = np.asarray(lower, dtype=np.int64)
    upper = np.minimum(np.asarray(upper, dtype=np.int64), total)
    counts = [1] + [0] * total  # counts[s] = number of partial vectors summing to s
    for lo, hi in zip(lower.tolist(), upper.tolist(), strict=True):
        if hi < lo:
            return 0
        new = [0] * (total + 1)
        # new[s] = sum_{v=lo..hi} counts[s - v], via a running window sum
        window = 0
        for s in range(total + 1):
            if s - lo >= 0:
                window += counts[s - lo]
            if s - hi - 1 >= 0:
                window -= counts[s - hi - 1]
            new[s] = window
        counts = new
    return counts[total]


def compositions(total: int, lower, upper) -> np.ndarray:
    """Every integer vector z with sum ``total`` and ``lower <= z <= upper``, one per row.

    Rows are in lexicographic order. Built cell by cell, keeping only partial vectors that
    the remaining cells can still complete, so no infeasible row is ever formed.
    """
    lower = np.asarray(lower, dtype=np.int64)
    upper = np.minimum(np.asarray(upper, dtype=np.int64), total)
    n_cells = lower.size
    if n_cells == 0:
        raise ValueError("compositions needs at least one cell")
    # after placing cells 0..k, the rest can absorb between rest_lo[k] and rest_hi[k]
    rest_lo = np.concatenate([np.cumsum(lower[::-1])[::-1][1:], [0]])
    rest_hi = np.concatenate([np.cumsum(upper[::-1])[::-1][1:], [0]])
    rows = np.zeros((1, 0), dtype=np.int64)
    sums = np.zeros(1, dtype=np.int64)
    for k in range(n_cells):
        values = np.arange(lower[k], upper[k] + 1, dtype=np.int64)
        new_sums = sums[:, None] + values[None, :]
        remaining = total - new_sums
        ok = (remaining >= rest_lo[k]) & (remaining <= rest_hi[k])
        parent, choice = np.nonzero(ok)
        rows = np.column_stack([rows[parent], values[choice]])
        sums = new_sums[parent, choice]
    return rows


def log_weight_table(cal: Calibration, ys: np.ndarray, zs: np.ndarray) -> np.ndarray:
    """Unnormalised ``log prod_k w_k(z_k)`` for every (y, z) pair: shape (len(ys), len(zs)).

    The factor ``1 / Gamma(~y_k + a_k)`` is left out: it does not depend on z and cancels
    on normalisation.
    """
    ys = np.atleast_2d(np.asarray(ys, dtype=np.int64))
    zs = np.atleast_2d(np.asarray(zs, dtype=np.int64))
    shapes = cal.clamp(ys) + cal.a[None, :]  # ~y_k + a_k, one row per y
    log_p = cal.log_success()
    # terms that depend on z only: -log z! + z log p
    z_only = (-gammaln(zs + 1.0) + zs * log_p[None, :]).sum(axis=1)
    table = np.zeros((ys.shape[0], zs.shape[0]))
    for k in range(cal.n_cells):
        table += gammaln(zs[None, :, k] + shapes[:, k, None])
    return table + z_only[None, :]


def log_pmf_table(cal: Calibration, ys, zs) -> np.ndarray:
    """Exact ``log q(z | y)`` for every y (rows) and every z of the full support (columns).

    ``zs`` must be the whole support (every z summing to the total within the bounds), since
    each row is normalised over it.
    """
    table = log_weight_table(cal, ys, zs)
    return table - logsumexp(table, axis=1, keepdims=True)


def exact_pmf(y, cal: Calibration) -> tuple[np.ndarray, np.ndarray]:
    """The support (rows z) and the exact probabilities q(z | y) of the release for data y."""
    lower, upper = cal.bounds()
    support = compositions(cal.total, lower, upper)
    if support.shape[0] == 0:
        raise ValueError("the bounds admit no vector summing to the total")
    probs = np.exp(log_pmf_table(cal, np.asarray(y)[None, :], support)[0])
    return support, probs
