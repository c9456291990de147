"""Exact-bivariate ("optimised") calibration of the truncated Poisson-gamma mechanism.

Quick (2022) derives eq (13) from a bound on the bivariate ratio of eqs (9)-(10): cell i
against the aggregate of the other cells, z_(i) = y. - z_i, with the aggregate's
posterior Gamma(y_(i) + a_(i), n_(i) + b_(i)) (Quick (2022), eq 3). Its supplement B.2, which
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

Computation: the loss of a cell is a compiled kernel
(:func:`dpcounts.privacy.bivariate_loss.cell_loss`, numba, cached on disk), O(pairs x
support) exponentials and O(pairs + support) logarithms per evaluation;
the 47,034-cell Study 2 stand-in calibrates in ~2 s per eps (benchmarks/calibration.py).
"""

from __future__ import annotations

import numpy as np

from dpcounts.mechanisms.poisson_gamma import truncated_shape_floor

BISECTION_STEPS = 32  # on log a: relative precision log(hi / lo) / 2^32
MAX_ROOT_STEPS = 100
#: Below this relative change per sweep, check the exact losses: stop if all are <= eps,
#: else sweep again, with a 10 times stricter margin if needed (see ``_next_margin``).
CHECK_RTOL = 1e-4
TARGET_MARGIN = 1e-7  # first target: eps (1 - TARGET_MARGIN)
SETTLED_RTOL = 1e-6
STALL_RATIO = 0.3
MAX_TARGET_MARGIN = 1e-3
OUTER_MAX_ITER = 50
MAX_SHAPE = 1e12  # no bivariate solution below this shape: refuse
SMALL_I = 64  # up to this many cells, Gauss-Seidel one cell at a time
GS_GROUPS = 16  # Gauss-Seidel groups per sweep (I > SMALL_I)
#: Root finder: stop at this bracket width in log a, or this relative distance to eps.
ROOT_TOL = 1e-9
#: Early sweeps move every shape again by their change so far: solve them only to
#: SWEEP_TOL_FACTOR x the last sweep's change (at most COARSE_TOL, at least ROOT_TOL).
SWEEP_TOL_FACTOR = 1e-3
COARSE_TOL = 1e-3
#: Warm start: first bracket step = WARM_STEP x the shape's last move (log a), at least
#: MIN_STEP. The sweeps contract by ~0.03-0.1, so the next move is usually within it.
WARM_STEP = 0.25
MIN_STEP = 1e-8
LOG_GROWTH = np.log(4.0)  # largest upward bracket step (log a)
_TRACE: list | None = None  # set to [] to record each sweep (change, margin, worst loss / eps)


class _Batch:
    """Cells of one Gauss-Seidel group: the a_i-independent inputs of ``cell_loss``."""

    def __init__(self, total, lower, upper, lower_agg, upper_agg, a_agg, log_r):
        self.total = int(total)
        self.size = lower.size
        self.lower = np.ascontiguousarray(lower, dtype=np.int64)
        self.upper = np.ascontiguousarray(upper, dtype=np.int64)
        self.lower_agg = np.ascontiguousarray(lower_agg, dtype=np.int64)
        self.upper_agg = np.ascontiguousarray(upper_agg, dtype=np.int64)
        self.a_agg = np.ascontiguousarray(a_agg, dtype=float)
        self.log_r = np.ascontiguousarray(log_r, dtype=float)

    def realised(self, a, log_p_shift, sel=None):
        """Largest |log p(z|y) - log p(z|x)| per cell for shapes ``a`` (one per cell).

        ``log_p_shift`` is the a-dependent part of log(p_i / p_(i)) per cell (log p_i),
        added to the fixed ``log_r`` = -log p_(i) (p_i depends on a_i through b_i).
        With ``sel``, only the cells ``sel`` (``a`` and ``log_p_shift`` given for those).
        """
        if sel is None:
            sel = slice(None)
        tilt = np.ascontiguousarray(self.log_r[sel] + log_p_shift, dtype=float)
        a = np.ascontiguousarray(a, dtype=float)
        # imported here: numba takes a fifth of a second to import, and most jobs that
        # import the calibrations never run this one
        from dpcounts.privacy.bivariate_loss import losses

        return losses(
            self.total, self.lower[sel], self.upper[sel], self.lower_agg[sel],
            self.upper_agg[sel], self.a_agg[sel], tilt, a, np.empty(a.size),
        )  # fmt: skip


def _log_p(a, expected):
    """log p_i = -log(a_i / (n_i lambda0_i) + 2)."""
    return -np.log(a / expected + 2.0)


def bivariate_epsilon(a, total, population, prior_rate, lower, upper) -> np.ndarray:
    """The exact bivariate privacy loss of every cell (see module docstring) for shapes a."""
    cells = _cell_inputs(a, total, population, prior_rate, lower, upper)
    everyone = np.arange(cells["a"].size)
    batch = _make_batch(cells, everyone, total)
    return batch.realised(cells["a"], _log_p(cells["a"], cells["expected"]))


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
    """Gauss-Seidel groups: the cells in increasing order of ``width`` (their kernel cost),
    cut into ``GS_GROUPS`` runs of about equal total cost (fewer if there are few cells)."""
    order = np.argsort(width, kind="stable")
    cost = np.cumsum(width[order], dtype=float)
    cuts = np.searchsorted(cost, cost[-1] * np.arange(1, GS_GROUPS) / GS_GROUPS, side="right")
    return [g for g in np.split(order, np.unique(cuts)) if g.size]


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


def _illinois(loss, log_lo, log_hi, f_lo, f_hi, epsilon, done, tol=None):
    """Root of loss(exp(u)) = eps in [log_lo, log_hi], returning the feasible end.

    The loss decreases in u = log a (checked in the tests); ``f_lo`` and ``f_hi`` are
    loss - eps at the ends, f_lo > 0 >= f_hi (except where ``done``). ``loss(a, sel)``
    evaluates the cells ``sel`` only.
    Regula falsi with the Illinois modification, the trial point kept inside the middle
    96 % of the bracket, the cells still open evaluated together. Stops when the bracket
    is below ``tol`` (default ``ROOT_TOL``) in log a or the feasible end's loss is within
    ``ROOT_TOL`` (relative) of eps; the result is always a shape whose loss is <= eps.
    """
    tol = ROOT_TOL if tol is None else tol
    g_lo, g_hi = f_lo.copy(), f_hi.copy()  # interpolation values (Illinois halves them)
    last_side = np.zeros(log_lo.size, dtype=np.int8)  # +1: hi moved last, -1: lo moved last
    for _ in range(MAX_ROOT_STEPS):
        width = log_hi - log_lo
        sel = np.flatnonzero(~done & (width > tol) & (f_hi < -ROOT_TOL * epsilon))
        if not sel.size:
            break
        # Interpolate towards loss = eps (1 - ROOT_TOL / 2), not eps: where the loss
        # is nearly linear over the bracket, the trial is then feasible and within the
        # tolerance, and the search ends.
        aim = 0.5 * ROOT_TOL * epsilon
        with np.errstate(invalid="ignore", divide="ignore"):
            t = (g_lo[sel] + aim) / (g_lo[sel] - g_hi[sel])
        t = np.clip(np.nan_to_num(t, nan=0.5), 0.02, 0.98)
        trial = log_lo[sel] + t * width[sel]
        f_trial = loss(np.exp(trial), sel) - epsilon
        feasible = f_trial <= 0
        side = last_side[sel]
        # Illinois: if the same end survives twice in a row, halve its interpolation value.
        g_lo[sel] = np.where(feasible & (side == 1), g_lo[sel] / 2, g_lo[sel])
        g_hi[sel] = np.where(~feasible & (side == -1), g_hi[sel] / 2, g_hi[sel])
        fs, inf = sel[feasible], sel[~feasible]
        log_hi[fs], f_hi[fs], g_hi[fs] = trial[feasible], f_trial[feasible], f_trial[feasible]
        log_lo[inf], f_lo[inf] = trial[~feasible], f_trial[~feasible]
        g_lo[inf] = f_trial[~feasible]
        last_side[fs], last_side[inf] = 1, -1
    return log_hi


def _solve_cells(cells, idx, total, epsilon, floor, start, step, tol=None):
    """Smallest a_i >= floor (within the root finder's tolerance, on the safe side) with
    loss <= eps, for the cells ``idx``.

    The bracket is sought around ``start``: from a feasible start, downwards to
    start * exp(-step), then 4 times further each time the probe is still feasible (never
    below the floor, which is accepted if feasible); from an infeasible start, upwards by
    min(step, log 4), growing the same way. A warm start (the previous sweep's shape, with
    ``step`` about its last move) brackets the root in one or two evaluations; ``step``
    = inf makes the first probe the floor (a cold start). ``tol``: the root finder's
    bracket width in log a (``_illinois``).
    """
    batch = _make_batch(cells, idx, total)
    expected = cells["expected"][idx]

    def loss(a, sel):
        return batch.realised(a, _log_p(a, expected[sel]), sel)

    log_floor = np.log(floor)
    u = np.log(np.maximum(start, floor))
    step = np.broadcast_to(np.asarray(step, dtype=float), u.shape).copy()
    everyone = np.arange(u.size)
    f = loss(np.exp(u), everyone) - epsilon
    feasible = f <= 0
    log_lo, f_lo = u.copy(), f.copy()  # infeasible end (or the floor)
    log_hi, f_hi = u.copy(), f.copy()  # feasible end
    ok_at_floor = feasible & (u <= log_floor)
    down = feasible & ~ok_at_floor  # still looking for an infeasible lower end
    up = ~feasible  # still looking for a feasible upper end
    log_max = np.log(MAX_SHAPE)
    while down.any() or up.any():
        if np.any(up & (log_lo >= log_max)):
            raise ValueError(
                f"exact bivariate calibration: no gamma shape up to {MAX_SHAPE:.3g} keeps "
                f"the bivariate loss within epsilon={epsilon} (the aggregate of the other "
                "cells alone exceeds it); use method='certified'"
            )
        probe = np.where(
            down,
            np.maximum(log_hi - step, log_floor),
            np.minimum(log_lo + np.minimum(step, LOG_GROWTH), log_max),
        )
        sel = np.flatnonzero(down | up)
        f_probe = np.full(u.size, np.nan)
        f_probe[sel] = loss(np.exp(probe[sel]), sel) - epsilon
        ok = f_probe <= 0
        # A feasible probe is the new upper end; an infeasible one the new lower end.
        move_hi = (down | up) & ok
        move_lo = (down | up) & ~ok
        log_hi = np.where(move_hi, probe, log_hi)
        f_hi = np.where(move_hi, f_probe, f_hi)
        log_lo = np.where(move_lo, probe, log_lo)
        f_lo = np.where(move_lo, f_probe, f_lo)
        ok_at_floor |= down & ok & (probe <= log_floor)
        down &= ok & ~ok_at_floor
        up &= ~ok
        step = step * 4.0
    log_hi = _illinois(loss, log_lo, log_hi, f_lo, f_hi, epsilon, ok_at_floor, tol)
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
    * I > 64: Gauss-Seidel sweeps over ``GS_GROUPS`` groups of cells (in increasing order
      of size), each cell solving its own constraint given the others' current shapes
      (one cell's shape moves a_(i) of the others very little) with the compiled loss
      ``cell_loss``, to a slightly stricter target eps (1 - margin), margin = 1e-7 at
      first. The first sweep starts from the floor (a cold start, solved to 1e-3 in
      log a); later ones bracket each shape around its current value (a warm start),
      solved to 1e-3 x the last sweep's change, down to 1e-9. Once a sweep changes no
      shape by more than ``CHECK_RTOL`` (relative), the exact losses are checked: all
      <= eps ends the search; otherwise the margin is made 10 times stricter.

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
    change, previous, worst = np.inf, np.inf, np.nan
    step = np.full(a.size, np.inf)  # first sweep: cold start (the floor is probed first)
    tol = COARSE_TOL
    for _ in range(OUTER_MAX_ITER):
        target = epsilon * (1.0 - margin)
        a_before, previous = a.copy(), change
        for idx in groups:
            cells = _cell_inputs(a, total, population, prior_rate, lower, upper)
            a[idx] = _solve_cells(cells, idx, total, target, floor_all[idx], a[idx], step[idx], tol)
            a = a[rep][inverse]
        change = np.max(np.abs(a - a_before) / a)
        tol = float(np.clip(SWEEP_TOL_FACTOR * change, ROOT_TOL, COARSE_TOL))
        # Warm start of the next sweep: bracket each shape around its last move.
        step = np.maximum(WARM_STEP * np.abs(np.log(a / a_before)), MIN_STEP)
        worst = np.nan
        if change <= CHECK_RTOL:
            # Nearly settled: accept as soon as every cell's exact loss is within eps
            # (feasibility is the guarantee; the last digits of optimality are not).
            loss = bivariate_epsilon(a, total, population, prior_rate, lower, upper)
            worst = float(np.max(loss))
        if _TRACE is not None:
            _TRACE.append({"change": change, "margin": margin, "worst": worst / epsilon})
        if worst <= epsilon:
            return a
        if change <= CHECK_RTOL:
            raised = _next_margin(margin, change, previous)
            # The stricter target moves the shapes by about the margin's change (log a).
            step = np.maximum(step, raised - margin)
            margin = raised
    raise RuntimeError(
        f"exact bivariate calibration did not reach loss <= epsilon={epsilon} in "
        f"{OUTER_MAX_ITER} sweeps (last relative change {change:.3g}, worst loss {worst:.6g})"
    )


def _next_margin(margin, change, previous):
    """The target margin after a sweep with relative change ``change`` <= ``CHECK_RTOL``
    (the sweep before it: ``previous``) whose check found a loss above eps.

    The loss is above eps because the other cells' shapes moved after a cell was solved;
    while the sweeps still contract (change <= ``STALL_RATIO`` x previous), one more sweep
    shrinks those moves and the margin stays. Once they no longer contract, or are
    settled (change <= ``SETTLED_RTOL``), the margin becomes 10 times stricter, at most
    ``MAX_TARGET_MARGIN``: a stricter target only raises shapes, which keeps the
    guarantee, but it is a permanent loss of optimality, so it grows only as needed.

    The earlier rule raised it only once a sweep changed no shape by more than 1e-6;
    sweeps that stall above that never raised it. They did at eps = 0.01 on the 47,034
    stand-in strata, where the NumPy loss carried a rounding noise of ~1e-8 (a_(i) ~ 1e7,
    lgamma ~ 1e8), ~1e-6 eps: 50 sweeps at a change ~1e-5, worst loss 1.00002 eps.
    """
    if change <= SETTLED_RTOL or change > STALL_RATIO * previous:
        return min(10.0 * margin, MAX_TARGET_MARGIN)
    return margin


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
