"""The compiled loss kernel of the exact-bivariate calibration against a NumPy reference,
and the Gauss-Seidel solver's margin logic."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import gammaln, logsumexp

from dpcounts import calibrate
from dpcounts.privacy import exact_bivariate as eb


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


def medium_instance():
    """120 cells with unequal populations and prior rates (y. ~ 400, sum(U - L) ~ 1600)."""
    rng = np.random.default_rng(4)
    population = rng.lognormal(8, 1, 120)
    prior_rate = rng.uniform(5e-4, 2e-3, 120)
    return int((population * prior_rate).sum()), population, prior_rate


def test_loss_is_smooth_where_the_aggregate_shape_is_large():
    # At small eps a_(i) reaches ~1e7 (the Study 2 stand-in at eps = 0.01), where
    # lgamma(y. - z + d + a_(i)) ~ 1e8 carries an absolute rounding error ~1e-8. The loss
    # must still decrease smoothly in a_i at relative steps of 1e-6 (the NumPy version
    # jumped by ~2e-8 at random there, as much as its steps, and the calibration stalled).
    total, population, prior_rate = 400, np.full(50, 1000.0), np.full(50, 0.008)
    lower, upper = np.full(50, 4, np.int64), np.full(50, 14, np.int64)
    a = np.full(50, 2.5e5)  # a_(i) ~ 1.2e7
    a[0] = 3000.0
    losses = []
    for k in range(8):
        trial = a.copy()
        trial[0] *= 1 + 1e-6 * k
        losses.append(eb.bivariate_epsilon(trial, total, population, prior_rate, lower, upper)[0])
    steps = np.diff(losses)
    assert 1e-3 < losses[0] < 0.1
    assert np.all(steps < 0)
    np.testing.assert_allclose(steps, steps.mean(), rtol=1e-3)


@pytest.mark.parametrize("epsilon", [1e-3, 1e-4])
def test_small_epsilon_with_large_aggregate_shapes_succeeds(epsilon):
    # The eps = 0.01 failure of the 47,034-cell stand-in, on 120 cells: here a_(i) ~ 1e6
    # (eps 1e-3) and 1e7 (eps 1e-4). The NumPy loss's rounding noise kept the sweeps from
    # settling below a relative change of ~1e-5 and the margin was never raised:
    # "did not reach loss <= epsilon in 50 sweeps". Feasible, and within ~1e-6 of eps.
    total, population, prior_rate = medium_instance()
    cal = calibrate("truncated", epsilon, total, population, prior_rate, method="exact")
    loss = eb.bivariate_epsilon(cal.a, total, population, prior_rate, cal.lower, cal.upper)
    assert loss.max() <= epsilon
    assert loss.max() > epsilon * (1 - 1e-5)


def test_next_margin_waits_while_contracting_and_tightens_when_stalled():
    # After a failed check at change <= CHECK_RTOL: contracting sweeps keep the margin ...
    assert eb._next_margin(1e-7, 5e-6, 1e-4) == 1e-7
    # ... stalled ones (here at a change of 1e-5, where the old rule, which waited for a
    # change <= 1e-6, never acted) and settled ones make it 10 times stricter, capped.
    assert eb._next_margin(1e-7, 1e-5, 1.2e-5) == pytest.approx(1e-6)
    assert eb._next_margin(1e-7, 5e-7, 1e-4) == pytest.approx(1e-6)
    assert eb._next_margin(eb.MAX_TARGET_MARGIN, 1e-5, 1e-5) == eb.MAX_TARGET_MARGIN


def test_noisy_loss_stalls_the_sweeps_and_the_margin_rescues_them(monkeypatch):
    # Reproduce the eps = 0.01 failure mechanism on 120 cells: a loss with a relative
    # noise of ~3e-6 that moves with a_i and a_(i) (the NumPy loss's rounding noise at
    # a_(i) ~ 1e7). The sweeps then stall at a relative change ~1e-5 with some loss just
    # above eps; the margin must grow until the check passes (the old rule waited for a
    # change <= 1e-6 and gave up after 50 sweeps).
    exact = eb._Batch.realised

    def noisy(self, a, log_p_shift, sel=None):
        a_agg = self.a_agg if sel is None else self.a_agg[sel]
        return exact(self, a, log_p_shift, sel) * (1 + 3e-6 * np.sin(1e7 * a + 1e3 * a_agg))

    monkeypatch.setattr(eb._Batch, "realised", noisy)
    trace = []
    monkeypatch.setattr(eb, "_TRACE", trace)
    total, population, prior_rate = medium_instance()
    cal = calibrate("truncated", 0.01, total, population, prior_rate, method="exact")
    margins = [s["margin"] for s in trace]
    assert margins[-1] > eb.TARGET_MARGIN  # the margin did grow ...
    assert trace[-1]["worst"] <= 1.0  # ... until the (noisy) check passed
    failed = [s for s in trace if s["worst"] > 1.0]
    assert any(s["change"] > eb.SETTLED_RTOL for s in failed)  # a stall above 1e-6
    loss = eb.bivariate_epsilon(cal.a, total, population, prior_rate, cal.lower, cal.upper)
    assert loss.max() <= 0.01


def test_warm_and_cold_starts_find_the_same_feasible_shapes():
    # _solve_cells from the floor (step inf) and from nearby starts on either side (steps
    # too small at first, so the bracket must grow) end at the same smallest feasible shape.
    total, population, prior_rate = medium_instance()
    cal = calibrate("truncated", 0.5, total, population, prior_rate, method="certified")
    cells = eb._cell_inputs(cal.a, total, population, prior_rate, cal.lower, cal.upper)
    idx = np.arange(population.size)
    floor = eb.truncated_shape_floor(cal.lower)
    target = 0.5
    cold = eb._solve_cells(cells, idx, total, target, floor, cal.a, np.inf)
    batch = eb._make_batch(cells, idx, total)
    expected = cells["expected"]
    assert np.all(batch.realised(cold, eb._log_p(cold, expected)) <= target)
    above = cold > floor
    assert above.sum() > 50
    for factor in (0.7, 0.999, 1.001, 1.5):
        warm = eb._solve_cells(cells, idx, total, target, floor, cold * factor, 1e-6)
        assert np.all(batch.realised(warm, eb._log_p(warm, expected)) <= target)
        np.testing.assert_allclose(warm, cold, rtol=1e-7)
