"""The exact bivariate privacy loss of one cell, compiled (numba, cached on disk).

Used by :mod:`dpcounts.privacy.exact_bivariate`, which explains the bivariate model; kept
apart so that importing the calibrations does not import numba.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from dpcounts import compile_cache

#: Cache the machine code on disk when numba can write it somewhere (dpcounts.compile_cache).
CACHE = compile_cache.available(__file__)


@numba.njit(cache=CACHE)
def cell_loss(total, lower, upper, lower_agg, upper_agg, a_agg, tilt, a, base, own, agg, wy, wx):
    """Largest |log p(z|y) - log p(z|x)| over the pairs and the support of one cell.

    The log weights of z given the clamped data (c for cell i, d for the aggregate) are
    lgamma(z + c + a_i) + lgamma(y. - z + d + a_(i)) - lgamma(z + 1) - lgamma(y. - z + 1)
    + z log(p_i / p_(i)) (``tilt`` = log(p_i / p_(i))). Each row (one pair, y or x) is
    normalised over the support by a max-shifted log-sum-exp, so any constant common to a
    row cancels: every lgamma is taken relative to the smallest argument of its table and
    built from sums of logs, lgamma(s + m) - lgamma(s) = sum_{k < m} log(s + k). That keeps
    the terms small where s is large (a_(i) ~ 1e7 at small eps, where lgamma(s) itself is
    ~1e8 and carries an absolute rounding error ~1e-8, comparable to eps * 1e-6).
    ``base``, ``own``, ``agg``, ``wy``, ``wx`` are scratch arrays, long enough.
    """
    z_lo = max(lower, total - upper_agg)
    z_hi = min(upper, total - lower_agg)
    n_z = z_hi - z_lo + 1
    c_lo = lower + 1
    n_c = min(upper, total) - lower
    if n_z <= 0 or n_c <= 0:
        return 0.0
    # base[j]: -lgamma(z + 1) - lgamma(y. - z + 1) + z tilt, z = z_lo + j, relative to j = 0.
    acc = 0.0
    base[0] = 0.0
    for j in range(1, n_z):
        z = z_lo + j
        acc += math.log(total - z + 1) - math.log(z)
        base[j] = acc + j * tilt
    # own[m] = lgamma(s + m) - lgamma(s), s = z_lo + c_lo - 1 + a: the argument z + c + a
    # (y) or z + c - 1 + a (x) depends on z + c only.
    s = z_lo + c_lo - 1 + a
    own[0] = 0.0
    for m in range(1, n_z + n_c):
        own[m] = own[m - 1] + math.log(s + (m - 1))
    # agg[t] = lgamma(y. + a_(i) + k0 + t) - lgamma(y. + a_(i) + k0): the aggregate's term
    # lgamma(y. - z + d + a_(i)) depends on d - z only, d the aggregate's clamped data.
    d_min = min(max(total - (c_lo + n_c - 1), lower_agg), upper_agg)
    d_max = min(max(total - c_lo + 1, lower_agg), upper_agg)
    k0 = d_min - z_hi
    s = total + k0 + a_agg
    agg[0] = 0.0
    for t in range(1, d_max - d_min + n_z):
        agg[t] = agg[t - 1] + math.log(s + (t - 1))
    best = 0.0
    for ci in range(n_c):
        c = c_lo + ci
        d_y = min(max(total - c, lower_agg), upper_agg)
        d_x = min(max(total - c + 1, lower_agg), upper_agg)
        max_y = -np.inf
        max_x = -np.inf
        for j in range(n_z):
            # index of d - z in agg: d - (z_lo + j) - k0 = d - d_min + n_z - 1 - j
            wy[j] = base[j] + own[j + ci + 1] + agg[d_y - d_min + n_z - 1 - j]
            wx[j] = base[j] + own[j + ci] + agg[d_x - d_min + n_z - 1 - j]
            max_y = max(max_y, wy[j])
            max_x = max(max_x, wx[j])
        sum_y = 0.0
        sum_x = 0.0
        for j in range(n_z):
            sum_y += math.exp(wy[j] - max_y)
            sum_x += math.exp(wx[j] - max_x)
        # log p(z|y) - log p(z|x) = wy - wx - (lse_y - lse_x)
        shift = (max_x + math.log(sum_x)) - (max_y + math.log(sum_y))
        for j in range(n_z):
            gap = abs(wy[j] - wx[j] + shift)
            if gap > best:
                best = gap
    return best


@numba.njit(cache=CACHE)
def losses(total, lower, upper, lower_agg, upper_agg, a_agg, tilt, a, out):
    """``cell_loss`` of every cell (flat arrays, one entry per cell) into ``out``."""
    n = lower.size
    longest = 1
    for i in range(n):
        n_z = min(upper[i], total - lower_agg[i]) - max(lower[i], total - upper_agg[i]) + 1
        n_c = min(upper[i], total) - lower[i]
        longest = max(longest, 2 * max(n_z, 0) + max(n_c, 0) + 2)
    base = np.empty(longest)
    own = np.empty(longest)
    agg = np.empty(longest)
    wy = np.empty(longest)
    wx = np.empty(longest)
    for i in range(n):
        out[i] = cell_loss(
            total, lower[i], upper[i], lower_agg[i], upper_agg[i], a_agg[i], tilt[i], a[i],
            base, own, agg, wy, wx,
        )  # fmt: skip
    return out
