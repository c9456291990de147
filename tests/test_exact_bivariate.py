"""The compiled loss kernel of the exact-bivariate calibration against a NumPy reference,
and the Gauss-Seidel solver's margin logic."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import gammaln, logsumexp

from dpsynth.privacy import exact_bivariate as eb


class NumpyBatch:
    """Reference: the vectorised NumPy loss (padded cell x pair x z grids) that the numba
    kernel replaced, kept verbatim."""

    def __init__(self, total, lower, upper, lower_agg, upper_agg, a_agg, log_r):
        total = int(total)
        self.size = lower.size
        z_lo = np.maximum(lower, total - upper_agg)
        z_hi = np.minimum(upper, total - lower_agg)
        n_z = np.maximum(z_hi - z_lo + 1, 0)
        n_pairs = np.maximum(np.minimum(upper, total) - lower, 0)
        zz = z_lo[:, None] + np.arange(max(n_z.max(), 1))[None, :]  # (B, Z)
        self.z_valid = np.arange(zz.shape[1])[None, :] < n_z[:, None]
        cc = lower[:, None] + 1 + np.arange(max(n_pairs.max(), 1))[None, :]  # (B, C)
        self.c_valid = np.arange(cc.shape[1])[None, :] < n_pairs[:, None]
        zz = np.where(self.z_valid, zz, z_lo[:, None]).astype(float)
        cc = np.where(self.c_valid, cc, lower[:, None] + 1).astype(float)
        d_y = np.clip(total - cc, lower_agg[:, None], upper_agg[:, None])
        d_x = np.clip(total - cc + 1, lower_agg[:, None], upper_agg[:, None])
        z_agg = total - zz  # (B, Z)
        base = gammaln(zz + 1) + gammaln(z_agg + 1)
        self.fixed_y = (
            gammaln(z_agg[:, None, :] + d_y[:, :, None] + a_agg[:, None, None])
            - base[:, None, :]
            + zz[:, None, :] * log_r[:, None, None]
        )
        self.fixed_x = (
            gammaln(z_agg[:, None, :] + d_x[:, :, None] + a_agg[:, None, None])
            - base[:, None, :]
            + zz[:, None, :] * log_r[:, None, None]
        )
        self.zz = zz
        self.cc = cc

    def realised(self, a, log_p_shift):
        zz, cc = self.zz[:, None, :], self.cc[:, :, None]
        a3 = a[:, None, None]
        tilt = zz * log_p_shift[:, None, None]
        log_wy = self.fixed_y + gammaln(zz + cc + a3) + tilt
        log_wx = self.fixed_x + gammaln(zz + cc - 1 + a3) + tilt
        mask = self.z_valid[:, None, :]
        log_wy = np.where(mask, log_wy, -np.inf)
        log_wx = np.where(mask, log_wx, -np.inf)
        log_py = log_wy - logsumexp(log_wy, axis=2, keepdims=True)
        log_px = log_wx - logsumexp(log_wx, axis=2, keepdims=True)
        with np.errstate(invalid="ignore"):
            gap = np.abs(log_py - log_px)
        diff = np.where(mask & self.c_valid[:, :, None], gap, 0.0)
        return diff.reshape(self.size, -1).max(axis=1)


def random_cells(rng, n_cells, total, max_width, shape_scale):
    """Random public inputs of ``n_cells`` cells of one model, as ``_cell_inputs`` builds them."""
    population = rng.lognormal(3.0, 1.0, n_cells)
    prior_rate = rng.lognormal(0.0, 0.5, n_cells) * total / population.sum()
    expected = population * prior_rate
    # Bounds around the expected counts (sum L <= y. <= sum U: a non-empty support).
    half = max_width // 2 + 1
    lower = np.maximum(np.floor(expected) - rng.integers(0, half, n_cells), 0).astype(np.int64)
    upper = np.minimum(np.ceil(expected) + rng.integers(0, half, n_cells), total).astype(np.int64)
    # Some cells with a bound at the total (kept small: the reference pads to it) and some
    # without moves (lower == upper).
    upper[:2] = total if total <= 400 else lower[:2] + max_width
    if n_cells > 2:
        upper[-1] = lower[-1]
    a = rng.lognormal(0.0, 1.5, n_cells) * shape_scale
    return eb._cell_inputs(a, total, population, prior_rate, lower, upper)


def both_losses(cells, total):
    idx = np.arange(cells["a"].size)
    args = (
        total, cells["lower"], cells["upper"], cells["lower_agg"], cells["upper_agg"],
        cells["a_agg"], -cells["log_p_agg"],
    )  # fmt: skip
    shift = eb._log_p(cells["a"], cells["expected"])
    fast = eb._Batch(*args).realised(cells["a"][idx], shift)
    slow = NumpyBatch(*args).realised(cells["a"][idx], shift)
    return fast, slow


@pytest.mark.parametrize(
    ("seed", "n_cells", "total", "max_width", "shape_scale"),
    [
        (1, 2, 12, 8, 1.0),  # small: the aggregate bounds bind
        (2, 3, 30, 12, 0.3),
        (3, 8, 60, 20, 5.0),
        (4, 40, 400, 40, 2.0),  # medium
        (5, 25, 2000, 90, 50.0),  # wide cells, large shapes
    ],
)
def test_kernel_matches_numpy_reference(seed, n_cells, total, max_width, shape_scale):
    rng = np.random.default_rng(seed)
    cells = random_cells(rng, n_cells, total, max_width, shape_scale)
    fast, slow = both_losses(cells, total)
    assert np.all(np.isfinite(fast))
    assert (fast > 0).sum() >= max(n_cells - 1, 2)  # the comparison is not vacuous
    # The reference itself rounds lgamma values of size ~1e5 (ulp ~1e-11): absolute 1e-10.
    np.testing.assert_allclose(fast, slow, rtol=1e-10, atol=1e-10)


def test_kernel_is_zero_without_moves_or_support():
    # lower == upper: no move changes the clamped count; lower > y.: empty support.
    lower = np.array([5, 30], np.int64)
    upper = np.array([5, 40], np.int64)
    batch = eb._Batch(20, lower, upper, np.array([0, 0]), np.array([20, 20]),
                      np.array([1.0, 1.0]), np.array([0.0, 0.0]))  # fmt: skip
    np.testing.assert_array_equal(batch.realised(np.array([1.0, 1.0]), np.zeros(2)), 0.0)
