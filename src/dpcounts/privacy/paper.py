"""The papers' closed-form calibrations of the gamma shapes (nominal epsilon).

* Untruncated PG, Quick (2021), eq (15) with nu_i of eq (14) / Quick (2022), eq (6).
* Truncated PG, Quick (2022), eq (13).

Both bounds on a_i depend on the other cells' shapes (through a_(i) and, for PG, through
b_(i) in r_i), so they are solved by fixed-point iteration to a relative tolerance of
1e-10. These are the papers' *nominal* calibrations: the exact audit shows that they can
exceed epsilon when populations or prior rates differ between cells (docs/privacy.md,
Part 2, "What the other methods guarantee").
Use ``dpcounts.privacy.certified`` for a calibration with a proof.
"""

from __future__ import annotations

import numpy as np

from dpcounts.mechanisms.poisson_gamma import truncated_shape_floor

RTOL = 1e-10
MAX_ITER = 10_000


def _fixed_point(update, a: np.ndarray, what: str, epsilon: float) -> np.ndarray:
    """Iterate ``a <- update(a)`` from ``a`` until the largest relative change is at most
    :data:`RTOL`; a ``RuntimeError`` naming ``what`` and ``epsilon`` after :data:`MAX_ITER`
    steps."""
    for _ in range(MAX_ITER):
        a_new = update(a)
        change = np.subtract(a_new, a)
        np.abs(change, out=change)
        change /= a_new
        if change.max() <= RTOL:
            return a_new
        a = a_new
    raise RuntimeError(
        f"{what} did not converge to relative tolerance {RTOL} in {MAX_ITER} iterations "
        f"at epsilon={epsilon}"
    )


def pg_nu(a, total: int, population, prior_rate) -> np.ndarray:
    """Penalty nu_i of Quick (2022), eq (6): (y.[1 - r_i]^+ + a_(i) + y. - 1) / (a_(i) + y. - 1).

    r_i = (b_(i)/n_(i) + 2) / (b_i/n_i + 2) with b = a / prior_rate and (i) the sum over
    the other cells.
    """
    population = np.asarray(population, dtype=float)
    prior_rate = np.asarray(prior_rate, dtype=float)
    return _pg_nu(a, total, population, population.sum() - population, prior_rate)


def _pg_nu(a, total, population: np.ndarray, n_other: np.ndarray, prior_rate):
    """:func:`pg_nu` with the float ``population`` and ``n_other`` = n. - n_i given (they do
    not change along the fixed-point iteration). ``a`` and ``prior_rate`` may also be rows
    of datasets, ``total`` then a column of their totals: each row's sums are its own."""
    a = np.asarray(a, dtype=float)
    b = np.divide(a, prior_rate)  # gamma_rates(a, prior_rate), with float prior rates
    # The operations of the formula, in its order, on reused buffers (the same numbers).
    r = b.sum(axis=-1, keepdims=True) - b  # b_(i)
    r /= n_other
    r += 2.0
    b /= population
    b += 2.0
    r /= b  # r_i = (b_(i)/n_(i) + 2) / (b_i/n_i + 2)
    np.subtract(1.0, r, out=r)
    np.maximum(r, 0.0, out=r)
    r *= total
    a_other = a.sum(axis=-1, keepdims=True) - a
    r += a_other
    r += total
    r -= 1.0
    a_other += total
    a_other -= 1.0
    r /= a_other
    return r


def pg_paper_shapes(epsilon: float, total: int, population, prior_rate) -> np.ndarray:
    """Gamma shapes a_i = y. / (e^eps / nu_i - 1) of Quick (2021), eq (15), solved to a fixed point.

    Starts from the MD value (nu = 1) and iterates a <- y. / (e^eps / nu(a) - 1) until the
    largest relative change is below 1e-10. Raises when e^eps <= nu_i (eq 15 has no
    positive solution) or when the iteration does not converge.
    """
    exp_eps = np.exp(epsilon)
    population = np.asarray(population, dtype=float)
    n_other = population.sum() - population
    prior_rate = np.asarray(prior_rate, dtype=float)

    def update(a):
        nu = _pg_nu(a, total, population, n_other, prior_rate)
        if nu.max() >= exp_eps:  # some nu_i >= e^eps (NaN passes, as np.any(nu >= e^eps))
            worst = int(np.argmax(nu))
            raise ValueError(
                f"PG paper calibration (Quick (2021), eq 15) has no solution at epsilon={epsilon}: "
                f"nu_{worst} = {nu[worst]:.6g} >= e^epsilon = {exp_eps:.6g}; use a larger "
                "epsilon or method='certified'"
            )
        nu = np.divide(exp_eps, nu, out=nu)
        nu -= 1.0
        return np.divide(total, nu, out=nu)  # y. / (e^eps / nu - 1)

    start = np.full(len(population), total / np.expm1(epsilon))
    return _fixed_point(update, start, "PG paper calibration", epsilon)


#: Rows of :func:`pg_paper_shapes_rows` iterated together: a block's working arrays stay
#: in the core's own cache (16 rows of 3,085 counties: 0.4 MB an array), where all the
#: rows at once stream every pass through memory. Rows are independent, so the blocks
#: give every row the same numbers.
BLOCK_ROWS = 16


def pg_paper_shapes_rows(epsilon: float, totals, population, prior_rates) -> np.ndarray:
    """:func:`pg_paper_shapes` of many datasets of one geography at once: row r of the
    (m, I) result is ``pg_paper_shapes(epsilon, totals[r], population, prior_rates[r])``,
    bit for bit (the same operations on each row, each row iterated until its own largest
    relative change is below 1e-10), for ``totals`` m positive integers and ``prior_rates``
    an (m, I) array of positive rates. A study that calibrates every dataset with its own
    prior (the sanitised state prior) pays NumPy's per-call cost once per block of
    :data:`BLOCK_ROWS` rows, not once per row, and each block's arrays stay in cache. Where
    rows have no solution, the error names the first found, block by block.
    """
    population = np.asarray(population, dtype=float)
    prior_rates = np.asarray(prior_rates, dtype=float)
    totals = np.asarray(totals)
    if prior_rates.ndim != 2 or prior_rates.shape[1] != population.size:
        raise ValueError(
            f"prior_rates must be (datasets, {population.size}), got shape {prior_rates.shape}"
        )
    if totals.shape != (prior_rates.shape[0],):
        raise ValueError(f"totals must hold one total per row, got shape {totals.shape}")
    n_other = population.sum() - population
    totals = totals.astype(np.int64)[:, None]
    out = np.empty(prior_rates.shape)
    for start in range(0, prior_rates.shape[0], BLOCK_ROWS):
        block = slice(start, start + BLOCK_ROWS)
        out[block] = _pg_paper_block(epsilon, totals[block], population, n_other,
                                     prior_rates[block], start)  # fmt: skip
    return out


def _pg_paper_block(epsilon, totals, population, n_other, prior_rates, first: int):
    """:func:`pg_paper_shapes_rows` of one block of rows (``totals`` a column; ``first``
    the block's first row, for the error's dataset number)."""
    exp_eps = np.exp(epsilon)
    out = np.empty(prior_rates.shape)
    rows = np.arange(prior_rates.shape[0])  # the rows not yet converged
    a = totals / np.expm1(epsilon) * np.ones(population.size)  # the MD value (nu = 1)
    for _ in range(MAX_ITER):
        if not rows.size:
            return out
        total = totals[rows]
        nu = _pg_nu(a, total, population, n_other, prior_rates[rows])
        worst = nu.max(axis=1)
        if np.any(worst >= exp_eps):  # NaN passes, as in pg_paper_shapes
            row = int(np.argmax(worst >= exp_eps))
            cell = int(np.argmax(nu[row]))
            raise ValueError(
                f"PG paper calibration (Quick (2021), eq 15) has no solution at epsilon={epsilon}"
                f" for dataset {first + int(rows[row])}: nu_{cell} = {nu[row, cell]:.6g} >= "
                f"e^epsilon = {exp_eps:.6g}; use a larger epsilon or method='certified'"
            )
        nu = np.divide(exp_eps, nu, out=nu)
        nu -= 1.0
        a_new = np.divide(total, nu, out=nu)
        change = np.subtract(a_new, a)
        np.abs(change, out=change)
        change /= a_new
        done = change.max(axis=1) <= RTOL
        out[rows[done]] = a_new[done]
        rows, a = rows[~done], a_new[~done]
    raise RuntimeError(
        f"PG paper calibration did not converge to relative tolerance {RTOL} in {MAX_ITER} "
        f"iterations at epsilon={epsilon}"
    )


def truncated_v(a, total: int, lower, upper) -> np.ndarray:
    """v_i of Quick (2022), eq (13): (2y. - 2L_i + a_(i) - 1) / (2y. - U_i - L_i + a_(i) - 1)."""
    a = np.asarray(a, dtype=float)
    a_other = a.sum() - a
    lower = np.asarray(lower, dtype=float)
    upper = np.asarray(upper, dtype=float)
    numerator = total - lower + a_other + total - lower - 1.0
    denominator = total - upper + a_other + total - lower - 1.0
    return numerator / denominator


def truncated_paper_shapes(epsilon: float, total: int, lower, upper) -> np.ndarray:
    """Gamma shapes of Quick (2022), eq (13), a_i >= (U_i - L_i)/(e^eps/v_i - 1) - 2 L_i, iterated.

    v_i depends on a_(i), so the bound is iterated to a fixed point (relative 1e-10),
    starting from v = 1. Each a_i is then at least 1/3 where L_i = 0 (Kerman 2011) and
    at least 1e-3 elsewhere (``truncated_shape_floor``). The caller checks the paper's
    no-dominant-cell assumption.
    """
    exp_eps = np.exp(epsilon)
    lower = np.asarray(lower, dtype=float)
    upper = np.asarray(upper, dtype=float)
    floor = truncated_shape_floor(lower)

    def update(a):
        v = truncated_v(a, total, lower, upper)
        if np.any(v >= exp_eps) or np.any(v <= 0):
            worst = int(np.argmax(np.where(v > 0, v, np.inf)))
            raise ValueError(
                f"truncated paper calibration (Quick (2022), eq 13) has no solution at "
                f"epsilon={epsilon}: v_{worst} = {v[worst]:.6g} is not in (0, e^epsilon = "
                f"{exp_eps:.6g}); use a larger epsilon or method='certified'"
            )
        return np.maximum((upper - lower) / (exp_eps / v - 1.0) - 2.0 * lower, floor)

    start = np.maximum((upper - lower) / np.expm1(epsilon) - 2.0 * lower, floor)
    return _fixed_point(update, start, "truncated paper calibration", epsilon)
