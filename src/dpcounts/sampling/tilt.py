"""The exponential tilt of the cells' pmfs, shared by both samplers.

Multiplying every p_k by one constant c multiplies q(z | y) by c^(y.), which cancels on
conditioning (module docstring of :mod:`dpcounts.sampling.conditioned`); c is chosen so
that the tilted cells' expected total is y., which makes the conditioning event typical.
Here: the solvers of log c (:func:`solve_tilt_untruncated`, a root find on the NBs' means;
:func:`solve_tilt_bounded_checked`, damped Newton steps checked and bisection on truncated
cells' windows), the cells' untilted log weights on their windows
(:func:`window_weights`) and the tilted pmfs and moments formed from them, and
:func:`nbinom_window`, the quantile windows of untruncated cells.
"""

from __future__ import annotations

import functools
import math

import numpy as np


class PaddedRows:
    """Cells' pmfs on integer windows, held as 2-D arrays grouped by window width.

    Grouping widths by powers of two keeps padding below half while letting every
    operation run on whole arrays.
    """

    def __init__(self, start: np.ndarray, width: np.ndarray):
        self.groups = []
        exponent = np.ceil(np.log2(np.maximum(width, 1))).astype(int)
        for e in np.unique(exponent):
            rows = np.nonzero(exponent == e)[0]
            columns = np.arange(2**e)
            valid = columns[None, :] < width[rows, None]
            values = start[rows, None] + columns[None, :]
            self.groups.append((rows, values, valid))


def solve_tilt_untruncated(shape: np.ndarray, log_p: np.ndarray, total: int) -> float:
    """log c with sum_k E[NB_k] = total, E = s q / (1 - q), q = p c < 1."""
    from scipy.optimize import brentq  # imported here: Study 1's jobs never need it

    top = -float(np.max(log_p))  # q_k < 1 for all k needs log c < top

    def excess(log_c: float) -> float:
        q = np.exp(log_p + log_c)
        return float(np.sum(shape * q / (1.0 - q))) - total

    low = top - 1.0
    while excess(low) > 0:
        low = top - 2.0 * (top - low)
    high = top - 1e-12
    if excess(high) < 0:  # only if the shapes are tiny: take the largest admissible tilt
        return high
    return brentq(excess, low, high, xtol=1e-10, rtol=1e-10)


def nbinom_window(q: float, shape: np.ndarray, success: np.ndarray, total: int):
    """``scipy.stats.nbinom``'s ``ppf(q)``, ``isf(q)`` and ``cdf(total)`` at (``shape``,
    ``success``), to the bit, for 0 < q < 1: the same kernels (Boost's, which scipy.stats
    calls), NaN where the parameters are invalid (shape <= 0, success outside (0, 1]), the
    cdf clipped to [0, 1] and 1 from the support's end, without importing scipy.stats
    (about a second of a study's job). ``tests/test_sampling_exact.py`` checks it
    against scipy.stats on random and edge arguments."""
    from scipy.special import _ufuncs  # scipy.stats.nbinom's own kernels

    kernels = [getattr(_ufuncs, f"_nbinom_{name}", None) for name in ("ppf", "isf", "cdf")]
    if None in kernels:  # pragma: no cover - another scipy: its public functions
        from scipy.stats import nbinom

        return (nbinom.ppf(q, shape, success), nbinom.isf(q, shape, success),
                nbinom.cdf(total, shape, success))  # fmt: skip
    ppf, isf, cdf = kernels
    shape, success = np.broadcast_arrays(np.asarray(shape, float), np.asarray(success, float))
    valid = (shape > 0) & (success > 0) & (success <= 1)
    with np.errstate(all="ignore"):  # invalid parameters: NaN below, as scipy.stats's
        lower = np.where(valid, ppf(q, shape, success) + 0.0, np.nan)
        upper = np.where(valid, isf(q, shape, success) + 0.0, np.nan)
        below = np.where(valid, np.clip(cdf(math.floor(total), shape, success), 0, 1), np.nan)
    return lower, upper, below


#: The largest table of log-factorials :func:`_log_factorials` keeps (32 MiB).
_LOG_FACTORIALS = 1 << 22


@functools.lru_cache(maxsize=4)
def _log_factorials(size: int) -> np.ndarray:
    """log v! for v = 0 .. size - 1, each as ``gammaln(v + 1.0)`` gives it (the same input,
    so the same bits): formed once per process, not once per build (a study builds a
    sampler per arm and epsilon, on windows of the same values). Read-only."""
    from scipy.special import gammaln

    table = gammaln(np.arange(size) + 1.0)
    table.flags.writeable = False
    return table


def _log_factorial(v: np.ndarray) -> np.ndarray:
    """``gammaln(v + 1.0)`` of non-negative integers ``v``, from :func:`_log_factorials`
    (sized by powers of two, so many builds share one table) when it is small enough."""
    from scipy.special import gammaln

    largest = int(v.max(initial=0))
    if largest >= _LOG_FACTORIALS:
        return gammaln(v + 1.0)
    return _log_factorials(max(1024, 1 << largest.bit_length()))[v]


def window_weights(shape, log_p, start, stop) -> tuple[PaddedRows, list[np.ndarray]]:
    """Each cell's values on its window [start, stop] and their untilted log NB weights,
    log Gamma(v + shape) - log v! + v log p (grouped rows, ``-inf`` in the padding)."""
    from scipy.special import gammaln  # imported here, as brentq: Study 1's jobs never need it

    rows = PaddedRows(start, stop - start + 1)
    base = [
        np.where(valid, gammaln(v + shape[r, None]) - _log_factorial(v), -np.inf)
        + v * log_p[r, None]
        for r, v, valid in rows.groups
    ]
    return rows, base


def _tilt_converged(mean: float, var: float, total: int) -> bool:
    """The tilted cells' total mean is within 0.05 of its sd (at least 0.05) of the total."""
    return abs(mean - total) < 0.05 * max(1.0, math.sqrt(max(var, 0.0)))


def _solve_tilt_bounded(moments, total: int) -> float:
    """log c with sum_k E[tilted cell k on its bounded window] close to total; ``moments``
    (log c) gives the tilted cells' summed means and variances (:func:`window_moments`).

    Damped Newton (the derivative of the mean in log c is the variance). Any c gives the
    same conditioned distribution, so a rough solution suffices.
    """
    log_c = 0.0
    for _ in range(60):
        mean, var = moments(log_c)
        if _tilt_converged(mean, var, total):
            break
        excess = mean - total
        # var -> 0 only when total is an end of the feasible range: lean towards it
        step = -excess / var if var > 1e-12 else -np.sign(excess) * 2.0
        log_c += float(np.clip(step, -2.0, 2.0))
    return log_c


def tilted_probabilities(rows: PaddedRows, base: list[np.ndarray], log_c: float):
    """The tilted cells' pmfs on their windows, one 2-D array per group of ``rows``."""
    from scipy.special import logsumexp

    probs = []
    for (_, values, _), logw in zip(rows.groups, base, strict=True):
        tilted = logw + log_c * values
        probs.append(np.exp(tilted - logsumexp(tilted, axis=1, keepdims=True)))
    return probs


def _tilted_moments(rows: PaddedRows, base: list[np.ndarray], log_c: float):
    """Sum over cells of the mean and of the variance of the tilted cells on their windows."""
    return window_moments(rows, base)(log_c)


class _WindowMoments:
    """The study mode's ``moments`` (log c) for the tilt solvers: :func:`_tilted_moments`
    on the cells' padded window weights, remembering the last log c it was asked for (bit
    for bit, the sign of a zero included) with the tilted pmfs it formed. The solver's
    check asks again for the tilt its steps stopped at, and the leaves are those very pmfs
    (:meth:`probabilities`): each formed once per build, not two or three times."""

    def __init__(self, rows: PaddedRows, base: list[np.ndarray]):
        self.rows, self.base = rows, base
        self._key, self._probs, self._moments = None, None, None

    def _at(self, log_c: float) -> None:
        key = float(log_c).hex()
        if key == self._key:
            return
        probs = tilted_probabilities(self.rows, self.base, log_c)
        mean = var = 0.0
        for (_, values, _), prob in zip(self.rows.groups, probs, strict=True):
            cell_mean = np.sum(prob * values, axis=1)
            mean += float(cell_mean.sum())
            var += float(np.sum(prob * values**2) - np.sum(cell_mean**2))
        self._key, self._probs, self._moments = key, probs, (mean, var)

    def __call__(self, log_c: float) -> tuple[float, float]:
        self._at(log_c)
        return self._moments

    def probabilities(self, log_c: float) -> list[np.ndarray]:
        """:func:`tilted_probabilities` at ``log_c`` (the arrays held, when it was the last
        tilt asked for: the caller may read them, not write them)."""
        self._at(log_c)
        return self._probs


def window_moments(rows: PaddedRows, base: list[np.ndarray]) -> _WindowMoments:
    """The study mode's ``moments`` (log c) for the tilt solvers (:class:`_WindowMoments`)."""
    return _WindowMoments(rows, base)


def solve_tilt_bounded_checked(moments, total: int) -> float:
    """The tilt of truncated cells in both modes: :func:`_solve_tilt_bounded`, checked, and
    bisection when it did not converge (where Newton converges, the same tilt).

    The damped Newton steps can cycle (a cell pinned at a bound has almost no variance) and
    stop after their 60 iterations far from the total; the tilted product measure then
    gives the event sum = y. so little mass that the 2^-400 floor cuts all of it, and the
    release fails, for some counts and not for their neighbours (the shapes ~y + a set
    where Newton lands). The tilted total's mean increases with log c (its derivative is
    the variance), so bisection on a bracket always converges; any tilt leaves q unchanged.
    """
    log_c = _solve_tilt_bounded(moments, total)
    if _tilt_converged(*moments(log_c), total):
        return log_c
    low, high = -1.0, 1.0
    for _ in range(60):  # widen the bracket (the total may sit at an end of the feasible range)
        if moments(low)[0] <= total:
            break
        low *= 2.0
    for _ in range(60):
        if moments(high)[0] >= total:
            break
        high *= 2.0
    for _ in range(200):
        log_c = 0.5 * (low + high)
        mean, var = moments(log_c)
        if _tilt_converged(mean, var, total) or high - low < 1e-12:
            break
        if mean < total:
            low = log_c
        else:
            high = log_c
    return log_c
