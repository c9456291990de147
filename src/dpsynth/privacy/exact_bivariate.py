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

import math

import numba
import numpy as np

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


@numba.njit(cache=True)
def _cell_loss(total, lower, upper, lower_agg, upper_agg, a_agg, tilt, a, base, own, agg, wy, wx):
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


@numba.njit(cache=True)
def _losses(total, lower, upper, lower_agg, upper_agg, a_agg, tilt, a, out):
    """``_cell_loss`` of every cell (flat arrays, one entry per cell) into ``out``."""
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
        out[i] = _cell_loss(
            total, lower[i], upper[i], lower_agg[i], upper_agg[i], a_agg[i], tilt[i], a[i],
            base, own, agg, wy, wx,
        )  # fmt: skip
    return out


class _Batch:
    """Cells of one Gauss-Seidel group: the a_i-independent inputs of ``_cell_loss``."""

    def __init__(self, total, lower, upper, lower_agg, upper_agg, a_agg, log_r):
        self.total = int(total)
        self.size = lower.size
        self.lower = np.ascontiguousarray(lower, dtype=np.int64)
        self.upper = np.ascontiguousarray(upper, dtype=np.int64)
        self.lower_agg = np.ascontiguousarray(lower_agg, dtype=np.int64)
        self.upper_agg = np.ascontiguousarray(upper_agg, dtype=np.int64)
        self.a_agg = np.ascontiguousarray(a_agg, dtype=float)
        self.log_r = np.ascontiguousarray(log_r, dtype=float)

    def realised(self, a, log_p_shift):
        """Largest |log p(z|y) - log p(z|x)| per cell for shapes ``a`` (one per cell).

        ``log_p_shift`` is the a-dependent part of log(p_i / p_(i)) per cell (log p_i),
        added to the fixed ``log_r`` = -log p_(i) (p_i depends on a_i through b_i).
        """
        tilt = np.ascontiguousarray(self.log_r + log_p_shift, dtype=float)
        out = np.empty(self.size)
        return _losses(
            self.total, self.lower, self.upper, self.lower_agg, self.upper_agg, self.a_agg,
            tilt, np.ascontiguousarray(a, dtype=float), out,
        )  # fmt: skip


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
