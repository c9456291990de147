"""Exact-bivariate ("optimised") calibration of the truncated Poisson-gamma mechanism.

Seed 001 derives eq (13) from a bound on the bivariate ratio of eqs (9)-(10): cell i
against the aggregate of the other cells, z_(i) = y. - z_i, with the aggregate's
posterior Gamma(y_(i) + a_(i), n_(i) + b_(i)) (seed 001 eq 3). Its supplement B.2, which
"optimises" the hyperparameters, is not available. This module plays that role: cell by
cell, it finds the smallest a_i for which the *exact* bivariate ratio stays within eps.

The bivariate model of cell i (all quantities public):

* cell i: shape a_i, success probability p_i = n_i / (b_i + 2 n_i), bounds [L_i, U_i];
* aggregate: shape a_(i), p_(i) = n_(i) / (b_(i) + 2 n_(i)), bounds
  [L_(i), U_(i)] = [sum_{j != i} L_j, sum_{j != i} U_j];
* support: z_i in [L_i, U_i] with y. - z_i in [L_(i), U_(i)];
* data: y_i and y_(i) = y. - y_i, each clamped to its bounds.

The privacy loss is maximised over every move that changes cell i's clamped count (the
moves a_i controls): y_i in [L_i + 1, min(U_i, y.)] against x_i = y_i - 1, and every z in
the support; |log ratio| covers the reverse move. Moves that leave cell i's clamped count
unchanged are the concern of the other cells' own solves.

Guarantee: only the bivariate one. For I = 2 the bivariate model *is* the mechanism and
the union of both cells' moves is every move, so the result is exactly eps-DP (up to
the bisection tolerance, taken on the safe side). For I > 2 the aggregate of NBs with
different p_j is not an NB and the full-vector guarantee does not follow: audit it, or
use ``method='certified'``.

Untruncated PG uses the same code with L = 0, U = y. (clamping then does nothing).
"""

from __future__ import annotations

import numpy as np
from scipy.special import gammaln, logsumexp

from dpsynth.mechanisms.poisson_gamma import truncated_shape_floor

BISECTION_STEPS = 32  # on log a: relative precision log(hi / lo) / 2^32
MAX_ROOT_STEPS = 100
OUTER_RTOL = 1e-6
#: Below this relative change per sweep, check the exact losses and stop if feasible.
CHECK_RTOL = 1e-4
TARGET_MARGIN = 1e-7
MAX_TARGET_MARGIN = 1e-3
OUTER_MAX_ITER = 50
MAX_SHAPE = 1e12  # no bivariate solution below this shape: refuse
SMALL_I = 64  # up to this many cells, Gauss-Seidel one cell at a time
BATCH_ENTRIES = 2_000_000  # cells x pairs x z values per vectorised batch


class _Batch:
    """Cells of one vectorised batch: padded (cell, pair, z) grids of the fixed terms."""

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
        # Aggregate's clamped data under y (y_(i) = y. - c) and under x (one event more).
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
        """Largest |log p(z|y) - log p(z|x)| per cell for shapes ``a`` (one per cell).

        ``log_p_shift`` is the a-dependent part of log(p_i / p_(i)) per cell, added to the
        fixed z * log r term (p_i depends on a_i through b_i).
        """
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
        with np.errstate(invalid="ignore"):  # -inf - -inf off the support; masked next
            gap = np.abs(log_py - log_px)
        diff = np.where(mask & self.c_valid[:, :, None], gap, 0.0)
        return diff.reshape(self.size, -1).max(axis=1)


def _log_p(a, expected):
    """log p_i = -log(a_i / (n_i lambda0_i) + 2)."""
    return -np.log(a / expected + 2.0)


def bivariate_epsilon(a, total, population, prior_rate, lower, upper) -> np.ndarray:
    """The exact bivariate privacy loss of every cell (see module docstring) for shapes a."""
    cells = _cell_inputs(a, total, population, prior_rate, lower, upper)
    out = np.empty(len(a))
    for idx in _batches(cells["width"]):
        batch = _make_batch(cells, idx, total)
        shift = _log_p(cells["a"][idx], cells["expected"][idx])
        out[idx] = batch.realised(cells["a"][idx], shift)
    return out


def _cell_inputs(a, total, population, prior_rate, lower, upper):
    a = np.asarray(a, dtype=float)
    population = np.asarray(population, dtype=float)
    prior_rate = np.asarray(prior_rate, dtype=float)
    lower = np.asarray(lower, dtype=np.int64)
    upper = np.asarray(upper, dtype=np.int64)
    b = a / prior_rate
    b_agg = b.sum() - b
    n_agg = population.sum() - population
    a_agg = a.sum() - a
    log_p_agg = -np.log(b_agg / n_agg + 2.0)
    return {
        "a": a,
        "expected": population * prior_rate,
        "lower": lower,
        "upper": upper,
        "lower_agg": lower.sum() - lower,
        "upper_agg": upper.sum() - upper,
        "a_agg": a_agg,
        "log_p_agg": log_p_agg,
        "width": (np.minimum(upper, total) - lower + 1) ** 2,
    }


def _batches(width):
    """Index groups of cells of similar size (padding at most 30 %), within BATCH_ENTRIES."""
    order = np.argsort(width, kind="stable")
    groups, start = [], 0
    while start < order.size:
        stop = start + 1
        smallest = width[order[start]]
        # Sorted by size, so the newest member is the largest: padded size = its size x count.
        while (
            stop < order.size
            and width[order[stop]] <= 1.3 * smallest + 4
            and width[order[stop]] * (stop - start + 1) <= BATCH_ENTRIES
        ):
            stop += 1
        groups.append(order[start:stop])
        start = stop
    return groups


def _make_batch(cells, idx, total):
    # The z * log(p_i) part moves with a_i, so the fixed tilt holds only -log p_(i).
    return _Batch(
        total,
        cells["lower"][idx],
        cells["upper"][idx],
        cells["lower_agg"][idx],
        cells["upper_agg"][idx],
        cells["a_agg"][idx],
        -cells["log_p_agg"][idx],
    )


def _illinois(loss, log_lo, log_hi, f_lo, f_hi, epsilon, done):
    """Root of loss(exp(u)) = eps in [log_lo, log_hi], returning the feasible end.

    The loss decreases in u = log a (checked in the tests); ``f_lo`` and ``f_hi`` are
    loss - eps at the ends, f_lo > 0 >= f_hi (except where ``done``).
    Regula falsi with the Illinois modification, the trial point kept inside the middle
    96 % of the bracket, every cell of the batch at once. Stops when the bracket is below
    1e-9 in log a or the feasible end's loss is within 1e-9 (relative) of eps; the result
    is always a shape whose loss is <= eps.
    """
    g_lo, g_hi = f_lo.copy(), f_hi.copy()  # interpolation values (Illinois halves them)
    last_side = np.zeros(log_lo.size, dtype=np.int8)  # +1: hi moved last, -1: lo moved last
    for _ in range(MAX_ROOT_STEPS):
        width = log_hi - log_lo
        active = ~done & (width > 1e-9) & (f_hi < -1e-9 * epsilon)
        if not active.any():
            break
        with np.errstate(invalid="ignore", divide="ignore"):
            t = g_lo / (g_lo - g_hi)
        t = np.clip(np.nan_to_num(t, nan=0.5), 0.02, 0.98)
        trial = log_lo + t * width
        f_trial = loss(np.exp(trial)) - epsilon
        feasible = (f_trial <= 0) & active
        infeasible = (f_trial > 0) & active
        # Illinois: if the same end survives twice in a row, halve its interpolation value.
        g_lo = np.where(feasible & (last_side == 1), g_lo / 2, g_lo)
        g_hi = np.where(infeasible & (last_side == -1), g_hi / 2, g_hi)
        log_hi = np.where(feasible, trial, log_hi)
        f_hi = np.where(feasible, f_trial, f_hi)
        g_hi = np.where(feasible, f_trial, g_hi)
        log_lo = np.where(infeasible, trial, log_lo)
        f_lo = np.where(infeasible, f_trial, f_lo)
        g_lo = np.where(infeasible, f_trial, g_lo)
        last_side = np.where(feasible, 1, np.where(infeasible, -1, last_side)).astype(np.int8)
    return log_hi


def _solve_cells(cells, idx, total, epsilon, floor, start):
    """Smallest a_i (within the root finder's tolerance, on the safe side) with loss <= eps."""
    batch = _make_batch(cells, idx, total)
    expected = cells["expected"][idx]

    def loss(a):
        return batch.realised(a, _log_p(a, expected))

    lo = floor.copy()
    loss_lo = loss(lo)
    ok_at_floor = loss_lo <= epsilon
    hi = np.maximum(start, lo * 2.0)
    loss_hi = loss(hi)
    ok_hi = loss_hi <= epsilon
    while np.any(~ok_hi & (hi < MAX_SHAPE)):
        # An infeasible hi is a better lower end than the floor.
        lo = np.where(ok_hi, lo, hi)
        loss_lo = np.where(ok_hi, loss_lo, loss_hi)
        hi = np.where(ok_hi, hi, np.minimum(hi * 4.0, MAX_SHAPE))
        loss_hi = loss(hi)
        ok_hi = loss_hi <= epsilon
    if not ok_hi.all():
        raise ValueError(
            f"exact bivariate calibration: no gamma shape up to {hi.max():.3g} keeps the "
            f"bivariate loss within epsilon={epsilon} (the aggregate of the other cells "
            "alone exceeds it); use method='certified'"
        )
    log_hi = _illinois(
        loss, np.log(lo), np.log(hi), loss_lo - epsilon, loss_hi - epsilon, epsilon, ok_at_floor
    )
    return np.where(ok_at_floor, floor, np.exp(log_hi))


def exact_bivariate_shapes(
    epsilon: float,
    total: int,
    population,
    prior_rate,
    lower,
    upper,
    start,
    *,
    truncated: bool = True,
) -> np.ndarray:
    """Shapes whose exact bivariate loss is <= eps in every cell, each as small as it can be.

    ``start`` (e.g. the certified shapes) seeds the search. Cells with the same
    (n_i, lambda0_i) share one shape.

    * I <= 64: coordinate descent from a feasible start (``_coordinate_descent``): one
      shape at a time, in decreasing order of prior expected count, is lowered as far as
      the largest loss of *all* cells allows, so the shapes stay feasible throughout.
    * I > 64: Gauss-Seidel sweeps over vectorised batches of cells of similar size, each
      cell solving its own constraint given the others' current shapes (one cell's shape
      moves a_(i) of the others very little), to a slightly stricter target
      eps (1 - 1e-7), until the largest relative change is below 1e-6 and every cell's
      loss with the final shapes is <= eps.

    Which point of the feasible set is reached depends on that order (it is stated, not
    optimised): for I = 2 both cells share one constraint, and the larger cell is lowered
    first. A plain Jacobi sweep can cycle, which is why it is not used.
    """
    population = np.asarray(population, dtype=float)
    prior_rate = np.asarray(prior_rate, dtype=float)
    floor_all = truncated_shape_floor(lower) if truncated else np.full(population.size, 1e-6)
    a = np.maximum(np.asarray(start, dtype=float), floor_all)
    # Cells with the same (n_i, lambda0_i) have the same bounds and, by symmetry, the same
    # shape: solve one representative and copy its shape to the others.
    _, rep, inverse = np.unique(
        np.column_stack([population, prior_rate]),
        axis=0,
        return_index=True,
        return_inverse=True,
    )
    inverse = inverse.ravel()
    a = a[rep][inverse]
    if population.size <= SMALL_I:
        return _coordinate_descent(
            epsilon, total, population, prior_rate, lower, upper, a, floor_all, rep, inverse
        )
    width = _cell_inputs(a, total, population, prior_rate, lower, upper)["width"]
    groups = [rep[g] for g in _batches(width[rep])]
    # Solve to a slightly stricter target so that the last sweep's tiny moves of the other
    # cells' shapes cannot push a cell's loss above eps.
    margin = TARGET_MARGIN
    change, worst = np.inf, np.nan
    for _ in range(OUTER_MAX_ITER):
        target = epsilon * (1.0 - margin)
        a_before = a.copy()
        for idx in groups:
            cells = _cell_inputs(a, total, population, prior_rate, lower, upper)
            a[idx] = _solve_cells(cells, idx, total, target, floor_all[idx], a[idx])
            a = a[rep][inverse]
        change = np.max(np.abs(a - a_before) / a)
        if change <= CHECK_RTOL:
            # Nearly settled: accept as soon as every cell's exact loss is within eps
            # (feasibility is the guarantee; the last digits of optimality are not).
            loss = bivariate_epsilon(a, total, population, prior_rate, lower, upper)
            worst = float(np.max(loss))
            if worst <= epsilon:
                return a
            if change <= OUTER_RTOL:
                # Settled just above eps (the other cells' last small moves): aim lower.
                # A stricter target only raises shapes, which keeps the guarantee.
                margin = min(10.0 * margin, MAX_TARGET_MARGIN)
    raise RuntimeError(
        f"exact bivariate calibration did not reach loss <= epsilon={epsilon} in "
        f"{OUTER_MAX_ITER} sweeps (last relative change {change:.3g}, worst loss {worst:.6g})"
    )


def _coordinate_descent(
    epsilon, total, population, prior_rate, lower, upper, a, floor_all, rep, inverse
) -> np.ndarray:
    """Few cells: lower one shape at a time while *every* cell's loss stays <= eps.

    ``a`` must be feasible (the certified shapes are). Cells are taken in decreasing order
    of prior expected count; each a_i is bisected (on log a) down to the smallest value
    keeping the largest bivariate loss of all cells within eps, so the shapes stay
    feasible throughout. Lowering a shape only tightens the others' constraints, so one
    pass reaches a point where no single shape can be lowered.
    """

    def worst_loss(shapes):
        return bivariate_epsilon(shapes, total, population, prior_rate, lower, upper).max()

    # The certified start bounds the true loss, not always the bivariate model's (whose
    # aggregate has shape a_(i)); scale it up until it is feasible there too.
    while worst_loss(a) > epsilon:
        if a.max() >= MAX_SHAPE:
            raise ValueError(
                f"exact bivariate calibration: no shapes up to {MAX_SHAPE:.0e} keep the "
                f"bivariate loss within epsilon={epsilon}; use method='certified'"
            )
        a = np.minimum(a * 2.0, MAX_SHAPE)
    order = rep[np.argsort(-(population * prior_rate)[rep], kind="stable")]
    members = [np.flatnonzero(inverse == inverse[i]) for i in order]
    for cell, group in zip(order, members, strict=True):
        trial = a.copy()
        trial[group] = floor_all[cell]
        if worst_loss(trial) <= epsilon:
            a = trial
            continue
        log_lo, log_hi = np.log(floor_all[cell]), np.log(a[cell])
        for _ in range(BISECTION_STEPS):
            mid = 0.5 * (log_lo + log_hi)
            trial[group] = np.exp(mid)
            if worst_loss(trial) <= epsilon:
                log_hi = mid
            else:
                log_lo = mid
        a = a.copy()
        a[group] = np.exp(log_hi)
    return a
