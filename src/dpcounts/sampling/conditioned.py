"""Exact sampler for independent (truncated) negative binomials conditioned on their sum.

Every mechanism in dpcounts releases z with pmf

    q(z | y) proportional to prod_k w_k(z_k),   sum_k z_k = y.,   L_k <= z_k <= U_k,
    w_k(z) = Gamma(z + ~y_k + a_k) / z! * p_k^z,

with ~y = ``cal.clamp(y)``, ``(L, U) = cal.bounds()`` and ``log p = cal.log_success()``
(md: p_k constant, the Dirichlet-multinomial; pg: posterior predictive NBs; truncated:
truncated NBs). :class:`ConditionedSampler` draws from q exactly by a binary tree of cell
pmfs: the leaves are the cells' pmfs, each internal node the convolution of its children
capped at y.; a draw fixes the root at y. and walks down, splitting a node's value t between
its children with probability proportional to left(k) * right(t - k).

Numerical devices (none changes the target distribution beyond the stated tail error):

* Tilting. Multiplying every p_k by one constant c multiplies q by c^(y.), which cancels
  on conditioning. c is chosen (1-D root find) so that the tilted cells' expected total is
  y.; the conditioning event is then typical and every pmf is concentrated.
* Tail truncation. Each node's tilted pmf (leaf or internal) is cut where its tail mass on
  either side is below ``tail`` = 1e-16 (untruncated cells are first restricted to an
  NB quantile window holding all but 1e-17 on each side). Draws are then exactly q
  restricted to the set A of z whose cells and subtree sums all stay inside the kept
  windows, and the total-variation distance to q is at most
  q(not A) <= (sum of the cut masses) / P_tilted(sum = y.), with P_tilted the product of
  the tilted cell pmfs on [L_k, min(U_k, y.)]. The bound is computed at build time
  (:attr:`ConditionedSampler.tv_bound`; ``benchmarks/mechanisms.py`` prints it).
* Every node is stored normalised with its log scale kept; long convolutions use FFT
  (negative round-off clipped to zero), short ones are direct.

Drawing walks the tree top-down in compiled code (:mod:`dpcounts.sampling.tree_draw`): one
short loop per split, and no random number where a node's value leaves its children no
choice, which is most nodes near the leaves of a sparse table.

The default mode above is what the simulation studies use. As implemented it is *not*
pure epsilon-DP, and its ``tv_bound`` is not rigorous: the cuts sit at y-dependent places,
a split is a 53-bit inverse CDF (``rng.random() * mass`` against float cumulative sums, so
an outcome of probability below about 2^-53 is unreachable or drawn at the wrong rate), and
FFT round-off is absolute, so small entries have unbounded relative error. Some outputs
then have probability 0 under y and > 0 under a neighbour.
:func:`dpcounts.sampling.implemented.implemented_pmf` computes what it really draws.

Release mode (``release=True``; :func:`release_sampler`)
--------------------------------------------------------
Built to be audited: it draws *exactly* from weights it holds, and bounds rigorously the
total variation (TV) between its draws and the ideal q(z | y) of the calibration (the
conditioned product above, with the calibration's doubles a, b, n taken as exact reals).
Releases then satisfy (epsilon, delta)-DP, delta from that bound (see "Guarantee").

*What is stored.* A double-double (dd) is a pair of doubles (hi, lo) standing for the
real hi + lo, with |lo| <= ulp(hi)/2. Leaf k: f(z + 1) = f(z) (z + s_k) rho_k / (z + 1)
from f(lo_k) = 1, with s_k = ~y_k + a_k (an exact dd) and rho_k = p_k c (one dd division;
p_k = n_k / (b_k + 2 n_k), 1 for md; c the tilt, a double), over lo_k..hi_k =
L_k..min(U_k, y.) (untruncated 0..y.), stopping early once the entries and a geometric
bound on everything beyond are below 2^-S of the largest (the ratio is monotone in z
with limit rho_k, so R = max(ratio at z, rho_k) bounds every later ratio), S =
``walk_stop_bits(tail)``: 440 with no tail cut, else 64 bits below ``tail`` (issue #36;
what the walk stops short of lies beyond the tail cut below, so the kept entries are
those of a walk to 2^-440, ``tests/test_release_tree_build.py``). Internal nodes:
direct dd convolutions of the stored children, capped at y. (no FFT; each entry adds its
products in increasing order of the left child's index, in compiled code on every core,
:mod:`dpcounts.sampling.tree_build`); the root only at y..
Every node is then cut: each tail of mass <= ``tail``, and every entry below 2^-400 times
the node's largest (so every stored entry is >= 2^-402 and every product >= 2^-804, in
the normal range), and rescaled by a power of two (exact).

*What is drawn.* A split of value t chooses k with probability exactly
W_k / sum_m W_m, W_k the dd product of the children's stored entries at k and t - k
(:func:`~dpcounts.sampling.tree_draw.exact_choice`: a uniform proposal, exact by
rejection from 53-bit integers, accepted by a Bernoulli(W_k / 2^E) decided by comparing
the binary expansion of the dyadic W_k / 2^E with fresh 53-bit integers).

*Bound, step by step.* u = 2^-53; delta_op = 16 u^2.

1. Each dd operation on non-negative normalised operands has relative error <= delta_op:
   Knuth's two-sum and the two-product (one FMA gives a product's rounding error exactly)
   are exact, and working the rounding of the remaining operations through gives
   multiply <= 8 u^2, add <= 3 u^2, divide <= 13 u^2 (each + O(u^3)); lo parts that fall
   below the normal range add less than 2^-270.
   (``tests/test_release_sampler.py`` checks these against exact rationals.)
2. Entries. A leaf entry j steps from its walk's start equals kappa_k g_k(z) (1 + e),
   g_k the tilted cell pmf, kappa_k a constant, |e| <= (1 + delta_op)^(6 j) - 1 (five
   operations per step, one more for rescalings). An internal entry that sums m products
   equals kappa_v F_v(s) (1 + e), F_v the exact convolution of the *stored* children,
   |e| <= (1 + delta_op)^(m + 2) - 1 (products, additions, rescaling).
3. Telescoping. For z in A (every node's value, leaves included, among its kept entries)
   P_impl(z) = prod_splits W(z_l, z_r) / sum_m W(m, t - m); with W = f_l f_r (1 + mu) and
   sum W = F_v(t) (1 + mu'), |mu|, |mu'| <= delta_op, each non-root F_v(t_v) cancels the
   f_v(t_v) = kappa_v F_v(t_v) (1 + e_v) of its parent's split. What is left is
   P_impl(z) = C prod_k g_k(z_k) E(z), C free of z, E the product of every (1 + e) and
   (1 + mu) / (1 + mu'): |log E| <= Lambda = N_ops * (-log(1 - delta_op)), N_ops =
   sum_leaves (6 j_k + 1) + sum_internal (m_v + 2) + 2 * splits. P_impl(z) = 0 off A.
   As prod g_k is proportional to q on A, P_impl = q_A E / E_qA[E], whence
   P_impl / q_A lies in [e^(-2 Lambda), e^(2 Lambda)] and
   TV(P_impl, q_A) <= e^(2 Lambda) - 1 =: ``rounding_bound``.
4. Cuts. q is the law of independent tilted cells Z given sum Z = y.; q_A is q restricted
   to A and TV(q_A, q) = q(not A). A z outside A has a lowest node v whose value was cut
   while its descendants' were kept; that event's probability is the mass node v cut
   (leaves: cut entries plus twice the unwalked tail's bound), so
   q(not A) <= (sum of cut masses) / P(sum Z = y., A) =: ``cut_bound``.
5. Bookkeeping. The masses of step 4 are evaluated in double from hi parts (relative
   error 2^-53 against the dd value), their logs summed along the tree; with sums of at
   most 10^4 positive terms and log-scales of moderate size the error is below 1e-9
   relative, plus Lambda and the unwalked tails (each leaf's below 2^-(S - 1) of its
   walked mass, S >= 118 for the release's tails, at most 1e-16: below 1e-28 relative for
   10^7 leaves); both terms are multiplied by 1 + 1e-6 (``_BOOKKEEPING_SLACK``).
6. TV(P_impl, q) <= ``cut_bound`` + ``rounding_bound`` = ``tv_bound``.

In practice ``rounding_bound`` is about 1e-28 for a few cells and 5e-26 (truncated) to
4e-25 (untruncated pg) for pennLC (1,071 cells, y. = 10,279); ``cut_bound`` falls with
``tail`` (pennLC truncated: 6e-12 at 1e-16, 4e-20 at 1e-24).

*Guarantee.* If q(. | y) is epsilon-DP (a certified calibration), then for neighbours y,
x and every set S of outputs, P_y(S) <= q_y(S) + tv_y <= e^eps q_x(S) + tv_y <=
e^eps P_x(S) + (1 + e^eps) max(tv_y, tv_x) (tv_y = TV(P_y, q_y) <= ``tv_bound``): one set is
(epsilon, (1 + e^eps) tau)-DP when every dataset's sampler is built with ``tv_bound`` <=
tau, as :func:`release_sampler` ensures or raises. ``tv_bound`` itself depends on y and
must not be published (tau may be). Not covered: the build failing for some y and not
for a neighbour (the event "no release" is visible). Two such failures depend on y and are
closed off: the tilt is checked and found by bisection when the damped Newton steps
stop far from y. (:func:`_solve_tilt_bounded_checked`, in both modes; a failed tilt left
the event sum = y. no mass for some y and not for their neighbours), a tail whose cuts
still leave that event no mass (the build raises) is skipped by :func:`release_sampler`
for the next, smaller tail, and a tau within reach of
the rounding term (which varies with y through the leaves' walks) is refused by the
release beforehand, from :func:`public_rounding_bound` (a function of the calibration
only). What remains needs a conditioning event of astronomically small probability. Also
not covered: timing (the number of random numbers used depends on y). k sets compose to
(k epsilon, k delta).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from dpcounts.calibration import Calibration
from dpcounts.mechanisms.registry import family

#: Tail mass cut from each side of every node's pmf.
TAIL = 1e-16
#: Convolutions whose inputs are at most this long are done directly, batched by width.
_DIRECT_CONVOLVE = 128
#: Relative allowance on the release-mode bound for its double-precision bookkeeping of
#: masses (logs and sums of the node masses; their error is below 1e-9, module docstring).
_BOOKKEEPING_SLACK = 1e-6
#: Release trees of at least this many cells are built on every core numba has.
_PARALLEL_CELLS = 20_000
#: Tails tried in turn by :func:`release_sampler`; 0 keeps every entry above the floor of
#: 2^-400 times its node's largest (``tree_draw.FLOOR_BITS``).
RELEASE_TAILS = (1e-16, 1e-24, 1e-32, 1e-48, 1e-64, 1e-80, 1e-96, 0.0)


def _fft_convolve(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The full linear convolution of two 1-D float arrays: what
    ``scipy.signal.fftconvolve(a, b)`` computes, by its own steps (the same FFT length,
    ``next_fast_len`` of the full size, and the same ``scipy.fft`` real transforms), so the
    same bits, without its per-call checks and array-API dispatch (half of its time at the
    sizes the tree convolves, paid hundreds of times per tree)."""
    from scipy import fft

    size = a.size + b.size - 1
    n = fft.next_fast_len(size, True)
    spectrum = fft.rfftn(a, [n], axes=[0]) * fft.rfftn(b, [n], axes=[0])
    return fft.irfftn(spectrum, [n], axes=[0])[:size]


def _fft_convolve_many(lefts: list[np.ndarray], rights: list[np.ndarray]) -> list[np.ndarray]:
    """``[_fft_convolve(a, b) for a, b in zip(lefts, rights)]``, the same bits, with one
    batched transform per FFT length instead of three per pair: pocketfft transforms each
    row of a 2-D array as it does a 1-D array (tests/test_sampling_large.py checks), and a
    tree level's long pairs share few lengths, so the per-call overhead of ``scipy.fft``
    (most of a pair's time at the sizes the tree convolves) is paid once per length."""
    rows = _fft_convolve_rows(lefts, rights, clip=False)
    sizes = [a.size + b.size - 1 for a, b in zip(lefts, rights, strict=True)]
    return [row[:size] for row, size in zip(rows, sizes, strict=True)]


@functools.cache
def _real_transforms():
    """(forward, inverse): the real transforms over the last axis of a C-contiguous 2-D
    float64 (complex128) array that ``scipy.fft.rfft(x, n, axis=-1)`` and
    ``scipy.fft.irfft(x, n, axis=-1)`` end in, pocketfft's own entry points called with
    the arguments scipy passes (no normalisation forward, 1/n back, one worker), without
    scipy's dispatch and argument checks: most of a transform's time at the widths the
    tree convolves, paid thousands of times a study. Where scipy keeps them elsewhere,
    scipy.fft's public functions (the same bits, tests/test_sampling_large.py checks)."""
    try:
        from scipy.fft._pocketfft import pypocketfft
    except ImportError:  # pragma: no cover - another scipy layout: its public functions
        from scipy import fft

        return (
            lambda x: fft.rfft(x, x.shape[-1], axis=-1),
            lambda x, n: fft.irfft(x, n, axis=-1),
        )
    return (
        lambda x: pypocketfft.r2c(x, (-1,), True, 0, None, 1),
        lambda x, n: pypocketfft.c2r(x, (-1,), n, False, 2, None, 1),
    )


def _fft_convolve_rows(
    lefts: list[np.ndarray], rights: list[np.ndarray], *, clip: bool = True
) -> np.ndarray:
    """The convolutions of :func:`_fft_convolve_many` as the rows of one zero-padded 2-D
    array (as wide as the longest), negative round-off set to zero when ``clip``: what
    ``_pad_rows([np.clip(c, 0.0, None) for c in _fft_convolve_many(lefts, rights)], w)``
    holds, the same bits, each length's rows copied into place from its inverse transform
    (one forward transform for the lefts and rights of a length together)."""
    from scipy import fft

    forward, inverse = _real_transforms()
    sizes = np.array([a.size + b.size - 1 for a, b in zip(lefts, rights, strict=True)])
    lengths = np.array([fft.next_fast_len(int(size), True) for size in sizes], dtype=np.int64)
    out = np.zeros((sizes.size, int(sizes.max(initial=0))))
    for n in np.unique(lengths).tolist():
        pick = np.flatnonzero(lengths == n)
        both = pick.tolist()
        spectra = forward(_pad_rows([lefts[i] for i in both] + [rights[i] for i in both], n))
        spectrum = spectra[: pick.size]
        spectrum *= spectra[pick.size :]
        width = min(n, out.shape[1])
        rows = inverse(spectrum, n)[:, :width]
        keep = np.arange(width)[None, :] < sizes[pick, None]
        out[pick, :width] = np.where(keep, rows, 0.0)
    if clip:
        np.clip(out, 0.0, None, out=out)
    return out


def check_counts(y, cal: Calibration) -> np.ndarray:
    """``y`` as int64 after checking it is a vector of non-negative integers summing to y."""
    if not isinstance(cal, Calibration):
        raise TypeError(f"cal must be a dpcounts.calibration.Calibration, got {type(cal)}")
    arr = np.asarray(y)
    if arr.ndim != 1 or arr.size != cal.n_cells:
        raise ValueError(f"y must be a vector of {cal.n_cells} counts, got shape {arr.shape}")
    if arr.dtype.kind not in "iuf" or not np.all(np.isfinite(arr)):
        raise ValueError(f"y must hold finite numbers, got dtype {arr.dtype}")
    counts = arr.astype(np.int64)
    if np.any(counts != arr) or np.any(counts < 0):
        raise ValueError("y must hold non-negative integers")
    if counts.sum() != cal.total:
        raise ValueError(f"y sums to {counts.sum()}, but the calibration's total is {cal.total}")
    return counts


def check_count_rows(ys, cal: Calibration) -> np.ndarray:
    """:func:`check_counts` of every row of the 2-D ``ys`` at once: int64 (m, I) (``ys``
    itself when it is an int64 array already: a study checks the same datasets for every
    arm and epsilon, and an int64 array needs no conversion and no comparison with one)."""
    if not isinstance(cal, Calibration):
        raise TypeError(f"cal must be a dpcounts.calibration.Calibration, got {type(cal)}")
    arr = np.asarray(ys)
    if arr.ndim != 2 or arr.shape[1] != cal.n_cells:
        raise ValueError(f"ys must be rows of {cal.n_cells} counts, got shape {arr.shape}")
    if arr.dtype == np.int64:
        counts = arr
        if np.any(counts < 0):
            raise ValueError("y must hold non-negative integers")
    else:
        if arr.dtype.kind not in "iuf" or not np.all(np.isfinite(arr)):
            raise ValueError(f"y must hold finite numbers, got dtype {arr.dtype}")
        counts = arr.astype(np.int64)
        if np.any(counts != arr) or np.any(counts < 0):
            raise ValueError("y must hold non-negative integers")
    sums = counts.sum(axis=1)
    if np.any(sums != cal.total):
        bad = int(sums[np.flatnonzero(sums != cal.total)[0]])
        raise ValueError(f"y sums to {bad}, but the calibration's total is {cal.total}")
    return counts


def check_feasible(cal: Calibration) -> tuple[np.ndarray, np.ndarray]:
    """The bounds capped at y.; ValueError when no vector within them sums to y."""
    lower, upper = cal.bounds()
    upper = np.minimum(upper, cal.total)
    if np.any(lower < 0) or np.any(upper < lower):
        raise ValueError("cal bounds must satisfy 0 <= lower <= upper in every cell")
    if lower.sum() > cal.total or upper.sum() < cal.total:
        raise ValueError(
            f"infeasible bounds: no vector within them sums to y.={cal.total} "
            f"(sum of lower bounds {lower.sum()}, sum of upper bounds capped at y. "
            f"{upper.sum()})"
        )
    return lower, upper


class _PaddedRows:
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


def _solve_tilt_untruncated(shape: np.ndarray, log_p: np.ndarray, total: int) -> float:
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


def _window_weights(shape, log_p, start, stop) -> tuple[_PaddedRows, list[np.ndarray]]:
    """Each cell's values on its window [start, stop] and their untilted log NB weights,
    log Gamma(v + shape) - log v! + v log p (grouped rows, ``-inf`` in the padding)."""
    from scipy.special import gammaln  # imported here, as brentq: Study 1's jobs never need it

    rows = _PaddedRows(start, stop - start + 1)
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


def _tilted_probabilities(rows: _PaddedRows, base: list[np.ndarray], log_c: float):
    """The tilted cells' pmfs on their windows, one 2-D array per group of ``rows``."""
    from scipy.special import logsumexp

    probs = []
    for (_, values, _), logw in zip(rows.groups, base, strict=True):
        tilted = logw + log_c * values
        probs.append(np.exp(tilted - logsumexp(tilted, axis=1, keepdims=True)))
    return probs


def _tilted_moments(rows: _PaddedRows, base: list[np.ndarray], log_c: float):
    """Sum over cells of the mean and of the variance of the tilted cells on their windows."""
    return window_moments(rows, base)(log_c)


class _WindowMoments:
    """The default mode's ``moments`` (log c) for the tilt solvers: :func:`_tilted_moments`
    on the cells' padded window weights, remembering the last log c it was asked for (bit
    for bit, the sign of a zero included) with the tilted pmfs it formed. The solver's
    check asks again for the tilt its steps stopped at, and the leaves are those very pmfs
    (:meth:`probabilities`): each formed once per build, not two or three times."""

    def __init__(self, rows: _PaddedRows, base: list[np.ndarray]):
        self.rows, self.base = rows, base
        self._key, self._probs, self._moments = None, None, None

    def _at(self, log_c: float) -> None:
        key = float(log_c).hex()
        if key == self._key:
            return
        probs = _tilted_probabilities(self.rows, self.base, log_c)
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
        """:func:`_tilted_probabilities` at ``log_c`` (the arrays held, when it was the last
        tilt asked for: the caller may read them, not write them)."""
        self._at(log_c)
        return self._probs


def window_moments(rows: _PaddedRows, base: list[np.ndarray]) -> _WindowMoments:
    """The default mode's ``moments`` (log c) for the tilt solvers (:class:`_WindowMoments`)."""
    return _WindowMoments(rows, base)


def _solve_tilt_bounded_checked(moments, total: int) -> float:
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


def _pad_rows(arrays: list[np.ndarray], width: int) -> np.ndarray:
    """Stack 1-D arrays (each at most ``width`` long) into a zero-padded 2-D array."""
    lengths = np.array([arr.size for arr in arrays])
    out = np.zeros((len(arrays), width))
    out[np.arange(width)[None, :] < lengths[:, None]] = np.concatenate(arrays)
    return out


def _trim_rows(prob: np.ndarray, tail: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row of normalised, zero-padded pmfs: the first and last kept column after cutting
    each tail whose mass is at most ``tail``, and the mass cut (compiled:
    :func:`dpcounts.sampling.tree_steps.trim_rows`, the bits of the running sums
    ``np.cumsum`` forms from each end)."""
    from dpcounts.sampling.tree_steps import trim_rows

    return trim_rows(np.ascontiguousarray(prob, dtype=float), float(tail))


def _rows_to_list(prob: np.ndarray, first: np.ndarray, last: np.ndarray) -> list[np.ndarray]:
    """Columns first..last of each row, renormalised, as a list of 1-D arrays."""
    columns = np.arange(prob.shape[1])[None, :]
    keep = (columns >= first[:, None]) & (columns <= last[:, None])
    kept = np.where(keep, prob, 0.0)
    kept /= kept.sum(axis=1, keepdims=True)
    flat = kept[keep]
    ends = np.cumsum(last - first + 1).tolist()
    # slices of one array, as np.split gives, without its per-piece cost (thousands a tree)
    return [flat[start:end] for start, end in zip([0, *ends[:-1]], ends, strict=True)]


def _join(chunks: list[np.ndarray]) -> np.ndarray:
    """The chunks one after another, each freed once copied: the peak is about one copy of
    the whole (a fresh large array takes memory only as it is written), not two."""
    out = np.empty(sum(chunk.size for chunk in chunks))
    position = 0
    for i in range(len(chunks)):
        size = chunks[i].size
        out[position : position + size] = chunks[i]
        chunks[i] = None  # the list held the last reference
        position += size
    return out


def _report(progress, fraction: float) -> None:
    if progress is not None:
        progress(fraction)


def _tree_work(leaf_lengths: np.ndarray, total: int) -> float:
    """A rough forecast of the multiply-adds of the release tree's convolutions, for
    progress only: widths add in quadrature up the tree (a sum's spread grows as the
    square root of its variance), capped at y. + 1."""
    widths = leaf_lengths.astype(float)
    work = 0.0
    while widths.size > 2:
        pairs = widths.size // 2
        left, right = widths[0 : 2 * pairs : 2], widths[1 : 2 * pairs : 2]
        work += float(np.sum(left * right))
        merged = np.minimum(np.sqrt(left**2 + right**2), total + 1.0)
        widths = np.concatenate([merged, widths[2 * pairs :]])
    return max(work, 1.0)


def _close_level(level, parents, lefts, rights, levels):
    """Record one level of the tree (an odd node out is carried up as its own parent, with
    right child -1) and return the next level's node ids (int64 arrays throughout)."""
    parents, lefts, rights = (np.asarray(x, dtype=np.int64) for x in (parents, lefts, rights))
    if len(level) % 2:
        parents = np.append(parents, level[-1])
        lefts = np.append(lefts, level[-1])
        rights = np.append(rights, -1)
    levels.append((parents, lefts, rights))
    return parents


def _finite(log_masses: np.ndarray) -> np.ndarray:
    """The finite entries (a cut of zero mass is -inf and adds nothing to the bound)."""
    return log_masses[log_masses > -np.inf]


#: Output entries of one chunk of a level's convolutions (:func:`_convolve_pairs`): 2^24
#: double-doubles, 256 MiB, whatever the level's size.
_CONVOLVE_ENTRIES = 1 << 24


def _convolve_pairs(cur_hi, cur_lo, starts, cur_lengths, out_lengths, tail, parallel):
    """One level's convolutions (pairs 2p, 2p + 1 of the level's nodes), trimmed, in chunks
    of pairs of at most :data:`_CONVOLVE_ENTRIES` output entries (each pair's entries are
    computed and cut exactly as in one pass; only the peak memory changes). Returns
    (values_hi, values_lo, first kept entry, kept lengths, log cut, log rescale) per pair."""
    from dpcounts.sampling import tree_build as tb

    n_pairs = out_lengths.size
    ends = np.cumsum(out_lengths)
    bounds = [0]
    while bounds[-1] < n_pairs:  # each chunk: at least one pair
        limit = (ends[bounds[-1] - 1] if bounds[-1] else 0) + _CONVOLVE_ENTRIES
        bounds.append(max(bounds[-1] + 1, int(np.searchsorted(ends, limit, side="right"))))
    parts_hi, parts_lo, firsts, lengths, cuts, rescales = [], [], [], [], [], []
    for a, b in zip(bounds[:-1], bounds[1:], strict=True):
        lefts = np.arange(2 * a, 2 * b, 2, dtype=np.int64)
        rights = lefts + 1
        lengths_ab = out_lengths[a:b]
        out_starts = np.concatenate([[0], np.cumsum(lengths_ab)[:-1]]).astype(np.int64)
        conv_hi = np.empty(int(lengths_ab.sum()))
        conv_lo = np.empty(conv_hi.size)
        tb.convolve_level(
            cur_hi, cur_lo, starts, cur_lengths, lefts, rights,
            out_starts, lengths_ab, conv_hi, conv_lo, parallel,
        )  # fmt: skip
        cut_first, cut_last, node_cut, node_rescale = tb.trim_level(
            conv_hi, conv_lo, out_starts, lengths_ab, tail, True, parallel
        )
        kept = cut_last - cut_first + 1
        kept_starts = np.concatenate([[0], np.cumsum(kept)[:-1]]).astype(np.int64)
        part_hi = np.empty(int(kept.sum()))
        part_lo = np.empty(part_hi.size)
        tb.gather(conv_hi, conv_lo, out_starts + cut_first, kept,
                  part_hi, part_lo, kept_starts, parallel)  # fmt: skip
        del conv_hi, conv_lo
        parts_hi.append(part_hi)
        parts_lo.append(part_lo)
        firsts.append(cut_first)
        lengths.append(kept)
        cuts.append(node_cut)
        rescales.append(node_rescale)
    new_hi = parts_hi[0] if len(parts_hi) == 1 else _join(parts_hi)
    new_lo = parts_lo[0] if len(parts_lo) == 1 else _join(parts_lo)
    return (new_hi, new_lo, *(np.concatenate(x) for x in (firsts, lengths, cuts, rescales)))


#: Cells whose leaves are walked at once by the release build (an even number: a chunk's
#: pairs are its own), then convolved into their first level before the next chunk.
_LEAF_CHUNK = 1 << 19


def _pair_up(cur_hi, cur_lo, cur_lengths, cur_offsets, cur_scale, total, tail, parallel):
    """The convolutions of a level's pairs (nodes 2p, 2p + 1; an odd node out is the
    caller's): (values hi, lo, lengths, offsets, log scales of the new nodes, their finite
    log cut masses, the dd operations the bound counts, the multiply-adds done)."""
    n_pairs = cur_lengths.size // 2
    lefts = np.arange(0, 2 * n_pairs, 2, dtype=np.int64)  # positions in the level
    rights = lefts + 1
    starts = np.concatenate([[0], np.cumsum(cur_lengths)[:-1]]).astype(np.int64)
    offset = cur_offsets[lefts] + cur_offsets[rights]
    scale = cur_scale[lefts] + cur_scale[rights]
    out_lengths = np.minimum(cur_lengths[lefts] + cur_lengths[rights] - 1, total - offset + 1)
    if np.any(out_lengths <= 0):
        raise RuntimeError("a subtree cannot reach y. within its windows")
    new_hi, new_lo, cut_first, new_lengths, node_cut, node_rescale = _convolve_pairs(
        cur_hi, cur_lo, starts, cur_lengths, out_lengths, float(tail), parallel
    )
    ops = int(np.sum(np.minimum(cur_lengths[lefts], cur_lengths[rights]) + 2))
    done = float(np.sum(cur_lengths[lefts].astype(float) * cur_lengths[rights]))
    return (new_hi, new_lo, new_lengths, offset + cut_first, scale + node_rescale,
            _finite(scale + node_cut), ops, done)  # fmt: skip


@dataclass(frozen=True)
class Spill:
    """Where a release-mode tree goes when it would be large: a file in ``directory``
    (made private, mode 0700, if it does not exist), created already unlinked (the system
    removes it when the process ends, however it ends: nothing is left behind by a killed
    release) and mapped into memory for the draws, which read it one level at a time. The
    tree goes there when its forecast, 16 bytes an entry times :data:`_TREE_PER_LEAF` times
    the leaves' stored entries, exceeds ``bytes``."""

    directory: Path
    bytes: float


#: A release tree's entries per leaf entry, for :class:`Spill`'s decision: the national
#: tables of issue #36 have 6.0 (1M strata) and about 4.8 (10M).
_TREE_PER_LEAF = 6.0


class _Values:
    """The tree's values, level by level in node-id order: chunks in memory joined at the
    end, or written to an unlinked file (:class:`Spill`) and mapped at the end.

    The leaves arrive in chunks (:meth:`ConditionedSampler._build_release`), so the choice
    is made as they come: the store moves to the file (what it held first, in order) as
    soon as the leaf entries seen so far forecast a tree above ``spill.bytes``, the test
    of :class:`Spill` on all the leaves, met at the first chunk that meets it."""

    def __init__(self, spill: Spill | None):
        self.chunks_hi, self.chunks_lo, self.files, self.maps, self.size = [], [], None, None, 0
        self.spill, self.leaf_entries = spill, 0

    def append(self, hi: np.ndarray, lo: np.ndarray, leaves: bool = False) -> None:
        if leaves:
            self.leaf_entries += hi.size
            if (
                self.files is None
                and self.spill is not None
                and 16.0 * _TREE_PER_LEAF * self.leaf_entries > self.spill.bytes
            ):
                self._to_file()
        if self.files is None:
            self.chunks_hi.append(hi)
            self.chunks_lo.append(lo)
            return
        for file, values in zip(self.files, (hi, lo), strict=True):
            file.write(memoryview(np.ascontiguousarray(values, dtype=np.float64)).cast("B"))
        self.size += hi.size

    def _to_file(self) -> None:
        import tempfile

        Path(self.spill.directory).mkdir(mode=0o700, parents=True, exist_ok=True)
        self.files = [tempfile.TemporaryFile(dir=self.spill.directory) for _ in range(2)]
        held = list(zip(self.chunks_hi, self.chunks_lo, strict=True))
        self.chunks_hi, self.chunks_lo = [], []
        for hi, lo in held:
            self.append(hi, lo)

    def finish(self) -> tuple[np.ndarray, np.ndarray]:
        """The values (hi, lo) as flat arrays: in memory, or views of the file's maps."""
        if self.files is None:
            return _join(self.chunks_hi), _join(self.chunks_lo)
        self.maps = []
        for file in self.files:
            file.flush()
            self.maps.append(np.memmap(file, dtype=np.float64, mode="r+", shape=(self.size,)))
            file.close()  # the map keeps the (unlinked) file alive
        return np.asarray(self.maps[0]), np.asarray(self.maps[1])


class ConditionedSampler:
    """Exact draws of z ~ prod_k w_k(z_k) | sum z = y. for one calibration and dataset.

    Build once (the tree costs a few convolutions per cell), then call :meth:`draw` as often
    as needed. See the module docstring for the distribution, the tilt and the 1e-16 tail
    truncation of every node's pmf; :attr:`tv_bound` bounds the resulting total-variation
    error.

    Parameters
    ----------
    y : the confidential counts (non-negative integers, one per cell, summing to cal.total)
    cal : the calibration; any mechanism (md, pg or truncated) is accepted
    tail : tail mass cut from each side of every node's pmf (default 1e-16)
    release : build the release mode (module docstring): double-double leaves and direct
        convolutions, exact splits, and a rigorous :attr:`tv_bound` =
        :attr:`cut_bound` + :attr:`rounding_bound`. The default mode (False) is unchanged:
        same draws for the same rng, and its ``tv_bound`` covers the tail cuts only.
    progress : release mode only: called with the fraction of the build done (0 to 1)
    """

    def __init__(
        self,
        y,
        cal: Calibration,
        *,
        tail: float = TAIL,
        release: bool = False,
        progress=None,
        spill: Spill | None = None,
    ):
        # scipy.stats and scipy.signal are imported by the methods that need them: they
        # take over a second to import, which every workflow job would otherwise pay.
        counts = check_counts(y, cal)
        lower, upper = check_feasible(cal)
        if not np.all(np.isfinite(cal.a)) or np.any(cal.a <= 0):
            raise ValueError("cal.a must be finite and positive in every cell")
        if not 0.0 <= tail < 0.01:
            raise ValueError(f"tail must be in [0, 0.01), got {tail}")
        self.calibration = cal
        self.total = cal.total
        self.n_cells = cal.n_cells
        self.tail = float(tail)
        self.release = bool(release)
        self._spilled = None  # release mode: the spill file's maps, when the tree went there
        shape = (cal.clamp(counts) + cal.a).astype(float)
        log_p = np.asarray(cal.log_success(), dtype=float)
        if not np.all(np.isfinite(log_p)):
            raise ValueError("cal.log_success() must be finite (check population and b)")
        if self.total == 0:  # the only vector is zero (feasibility forced lower = 0)
            self.log_tilt, self.log_event_probability, self.tv_bound = 0.0, 0.0, 0.0
            self.cut_bound = self.rounding_bound = 0.0
            self._levels = []
            return
        if self.release:
            self._build_release(counts, shape, log_p, lower, upper, tail, progress, spill)
            return
        self._build_leaves(shape, log_p, lower, upper, tail)
        self._build_tree(tail)

    # --- construction --------------------------------------------------------------
    def _build_leaves(self, shape, log_p, lower, upper, tail) -> None:
        total = self.total
        window_cut = 0.0
        if self.calibration.truncated:
            start, stop = lower, upper
            rows, base = _window_weights(shape, log_p, start, stop)
            moments = window_moments(rows, base)
            log_c = _solve_tilt_bounded_checked(moments, total)
            probs = moments.probabilities(log_c)  # formed by the tilt's last step
        else:
            log_c = _solve_tilt_untruncated(shape, log_p, total)
            success = 1.0 - np.exp(log_p + log_c)  # scipy's nbinom counts failures
            start, stop, below_total = nbinom_window(tail / 10, shape, success, total)
            start = np.nan_to_num(start, nan=0.0)
            stop = np.nan_to_num(stop, nan=total)
            start = np.minimum(start, total).astype(np.int64)
            stop = np.clip(stop, start, total).astype(np.int64)
            # the cut is measured against each cell's tilted pmf on [0, y.] (larger values
            # cannot occur given the sum), which holds a share F_k(y.) of the NB's mass
            # (below_total: F_k(y.))
            window_cut = 2 * (tail / 10) * float(np.sum(1.0 / below_total))
            rows, base = _window_weights(shape, log_p, start, stop)
            probs = _tilted_probabilities(rows, base, log_c)
        self.log_tilt = float(log_c)
        offsets = np.zeros(self.n_cells, np.int64)
        pmfs: list[np.ndarray | None] = [None] * self.n_cells
        for (cells, values, _), prob in zip(rows.groups, probs, strict=True):
            first, last, cut = _trim_rows(prob, tail)
            window_cut += float(cut.sum())
            offsets[cells] = values[np.arange(cells.size), first]
            for cell, pmf in zip(cells, _rows_to_list(prob, first, last), strict=True):
                pmfs[cell] = pmf
        self._leaf_offsets = offsets
        self._leaf_pmfs = pmfs
        self._cut_mass = window_cut

    def _build_tree(self, tail: float) -> None:
        from dpcounts.sampling.tree_steps import direct_convolve

        total = self.total
        offsets = list(self._leaf_offsets.tolist())
        pmfs = list(self._leaf_pmfs)
        log_scale = [0.0] * self.n_cells
        level = list(range(self.n_cells))  # node ids of the current level
        # levels[i] = (node ids, left child ids, right child ids; -1 = carried unchanged)
        levels: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        cut_mass = self._cut_mass
        while len(level) > 1:
            n_pairs = len(level) // 2
            lefts, rights = np.array(level[0 : 2 * n_pairs : 2]), np.array(level[1::2])
            parents = np.arange(len(pmfs), len(pmfs) + n_pairs)
            trim = len(level) > 2  # the root is never trimmed: it must keep y.
            longest = np.maximum(
                [pmfs[i].size for i in lefts.tolist()], [pmfs[i].size for i in rights.tolist()]
            )
            pairs = []  # (positions among this level's pairs, their convolutions as rows)
            # short pairs: one batched direct convolution per padded width
            exponent = np.ceil(np.log2(longest)).astype(int)
            for e in np.unique(exponent[longest <= _DIRECT_CONVOLVE]):
                pick = np.nonzero((exponent == e) & (longest <= _DIRECT_CONVOLVE))[0]
                width = 2**e
                left_rows = _pad_rows([pmfs[i] for i in lefts[pick].tolist()], width)
                right_rows = _pad_rows([pmfs[i] for i in rights[pick].tolist()], width)
                conv = np.zeros((pick.size, 2 * width - 1))
                direct_convolve(left_rows, right_rows, conv)  # the numpy loop's bits
                pairs.append((pick, conv))
            # long pairs (near the root): FFT convolutions, batched by transform length
            pick = np.nonzero(longest > _DIRECT_CONVOLVE)[0]
            if pick.size:
                conv = _fft_convolve_rows(
                    [pmfs[i] for i in lefts[pick].tolist()],
                    [pmfs[i] for i in rights[pick].tolist()],
                )
                pairs.append((pick, conv))
            new_pmfs: list[np.ndarray | None] = [None] * n_pairs
            new_offsets = np.zeros(n_pairs, np.int64)
            new_scales = np.zeros(n_pairs)
            child_offsets, child_scales = np.array(offsets), np.array(log_scale)
            for pick, conv in pairs:
                left, right = lefts[pick], rights[pick]
                offset = child_offsets[left] + child_offsets[right]
                scale = child_scales[left] + child_scales[right]
                rows, new_offsets[pick], new_scales[pick], cut = self._finish(
                    conv, offset, scale, trim, tail
                )
                cut_mass += cut
                for pos, pmf in zip(pick.tolist(), rows, strict=True):
                    new_pmfs[pos] = pmf
            pmfs.extend(new_pmfs)
            offsets.extend(new_offsets.tolist())
            log_scale.extend(new_scales.tolist())
            level = _close_level(level, list(parents), list(lefts), list(rights), levels)
        root = level[0]
        where = total - offsets[root]
        if not 0 <= where < pmfs[root].size or not pmfs[root][where] > 0:
            raise RuntimeError(
                "the conditioning event sum z = y. has no mass inside the kept windows; "
                "the tilt failed (please report this calibration)"
            )
        self.log_event_probability = float(log_scale[root] + np.log(pmfs[root][where]))
        self.tv_bound = float(cut_mass * np.exp(-self.log_event_probability))
        self._levels = levels
        self._offsets = np.array(offsets, dtype=np.int64)
        self._lengths = np.array([p.size for p in pmfs], dtype=np.int64)
        self._starts = np.concatenate([[0], np.cumsum(self._lengths)[:-1]]).astype(np.int64)
        self._values = np.concatenate(pmfs)
        # internal nodes top-down (root level first), as the compiled draw wants them
        top_down = levels[::-1]
        empty = np.empty(0, np.int64)  # one cell: no internal nodes
        self._parents, self._lefts, self._rights = (
            np.concatenate([empty] + [level[part] for level in top_down]).astype(np.int64)
            for part in range(3)
        )
        self._pmfs = pmfs
        self._root = root

    def _finish(self, conv, offset, scale, trim: bool, tail: float):
        """Cap convolution rows at y., normalise and trim them.

        ``offset`` is each row's smallest value and ``scale`` its log mass so far. Returns
        the rows as pmfs, their new offsets and log scales, and the absolute mass cut.
        """
        columns = np.arange(conv.shape[1])
        conv[offset[:, None] + columns[None, :] > self.total] = 0.0  # sums above y. cannot occur
        mass = conv.sum(axis=1)
        if not np.all(mass > 0):
            raise RuntimeError("a subtree cannot reach y. within its windows")
        conv /= mass[:, None]
        scale = scale + np.log(mass)
        if trim:
            first, last, cut = _trim_rows(conv, tail)
        else:
            first = np.zeros(offset.size, np.int64)
            last = np.minimum(conv.shape[1] - 1, self.total - offset)
            cut = np.zeros(offset.size)
        rows = _rows_to_list(conv, first, last)
        cut_mass = float(np.sum(cut * np.exp(scale)))
        return rows, offset + first, scale + np.log1p(-cut), cut_mass

    # --- release mode ----------------------------------------------------------------
    def _release_log_tilt(self, shape, log_p, lower, upper) -> float:
        """The default mode's tilt, checked (any tilt leaves q unchanged), with the cells'
        moments streamed in compiled code (:func:`~dpcounts.sampling.tree_build.
        tilted_moments`): memory per cell, not per window entry (issue #36)."""
        from dpcounts.sampling import tree_build as tb

        if self.calibration.truncated:
            import numba

            parallel = self.n_cells >= _PARALLEL_CELLS and numba.get_num_threads() > 1
            moments = functools.partial(
                tb.tilted_moments,
                np.asarray(lower, np.int64),
                np.asarray(upper, np.int64),
                np.ascontiguousarray(shape, dtype=float),
                np.ascontiguousarray(log_p, dtype=float),
                parallel,
            )
            return _solve_tilt_bounded_checked(moments, self.total)
        return _solve_tilt_untruncated(shape, log_p, self.total)

    def _build_release(self, counts, shape, log_p, lower, upper, tail, progress, spill) -> None:
        """Leaves by exact-ratio recurrences and direct convolutions, all in double-double;
        see "Release mode" in the module docstring for what is stored and what is bounded.
        The compiled work runs in :mod:`dpcounts.sampling.tree_build`, on every core numba
        has; ``progress`` (if given) is called with the fraction of the work done.

        Memory (issue #36): the tree is built level by level, and each level, once
        finished, goes to the value store (:class:`_Values`): kept in memory, or written to
        ``spill``'s file when the tree would be large (:class:`Spill`). The leaves are
        walked in chunks of :data:`_LEAF_CHUNK` cells, each chunk's pairs convolved into
        the first level at once, so the leaves are never all held; above them, only the
        level being convolved and the one it makes are held, the convolution itself done in
        chunks of at most :data:`_CONVOLVE_ENTRIES` output entries, and everything the
        draw does not read (the leaves' walk results, the log scales, the cut masses as
        they are summed) is dropped as soon as it has been used."""
        import numba

        from dpcounts.sampling import tree_build as tb
        from dpcounts.sampling import tree_draw as td

        cal = self.calibration
        total, n_cells = self.total, self.n_cells
        if n_cells == 1:  # z = (y.) is the only vector: nothing to draw, nothing to bound
            self.log_tilt = self.log_event_probability = 0.0
            self.cut_bound = self.rounding_bound = self.tv_bound = 0.0
            self._store_flat(np.ones(1), np.zeros(1), np.ones(1), np.array([total]), [], 0)
            return
        tilt = float(np.exp(self._release_log_tilt(shape, log_p, lower, upper)))
        self.log_tilt = float(np.log(tilt))
        # s_k = ~y_k + a_k exactly, as a double-double (Knuth's two-sum, elementwise)
        clamped = np.asarray(cal.clamp(counts), dtype=float)
        s_hi = clamped + cal.a
        s_back = s_hi - clamped
        s_lo = (clamped - (s_hi - s_back)) + (cal.a - s_back)
        md = not family(cal.mechanism).uses_prior  # a Dirichlet's: no rates
        population = np.ones(n_cells) if md else np.asarray(cal.population, dtype=float)
        rates = np.zeros(n_cells) if md else np.asarray(cal.b, dtype=float)
        rho_hi, rho_lo = np.empty(n_cells), np.empty(n_cells)
        td.tilted_success(population, rates, tilt, md, rho_hi, rho_lo)
        if not np.allclose(np.log(rho_hi) - np.log(tilt), log_p, rtol=0.0, atol=1e-9):
            raise RuntimeError("release mode's p_k disagree with cal.log_success()")
        if cal.truncated:
            lo_w, hi_w = lower.astype(np.int64), upper.astype(np.int64)
        else:
            lo_w, hi_w = np.zeros(n_cells, np.int64), np.full(n_cells, total, np.int64)

        log2 = float(np.log(2.0))
        # every core for a large table; one thread for a small one, which would spend more
        # starting the threads (and loading their code) than they save
        parallel = n_cells >= _PARALLEL_CELLS and numba.get_num_threads() > 1
        # The leaves are walked in chunks of cells (:data:`_LEAF_CHUNK`), each chunk's leaves
        # sent to the store and, in the same pass, its pairs convolved into the first
        # level: all the leaves are never held at once (issue #36: at 10M strata they are
        # the largest level). Every pair's values and cuts are those of one pass.
        ops, log_cuts, done = 0, [], 0.0  # log_cuts: each node's cut mass, tilted measure
        fuse = n_cells > 2  # with two cells the first level is the root's value alone
        store = _Values(spill)
        leaf_offsets, leaf_lengths, carried = [], [], []
        up: list[list[np.ndarray]] = [[], [], [], [], []]  # the first level's pieces
        for a in range(0, n_cells, _LEAF_CHUNK):
            b = min(a + _LEAF_CHUNK, n_cells)
            (leaf_hi, leaf_lo, lengths, first, n_walk, log_cut, log_total, log_rescale, best,
             remainder) = tb.build_leaves(
                lo_w[a:b], hi_w[a:b], s_hi[a:b], s_lo[a:b], rho_hi[a:b], rho_lo[a:b],
                float(tail), parallel,
            )  # fmt: skip
            # the unwalked tail counts twice its geometric bound
            unwalked = remainder > -np.inf
            log_cut = np.where(
                unwalked, np.logaddexp(log_cut, (remainder + best + 1.0) * log2), log_cut
            )
            # dd operations that touch a value used by the draw, along any z
            ops += int(np.sum(td.LEAF_OPS_PER_STEP * (n_walk - 1) + 1))
            # stored * exp(log_scale) = g_k, the tilted cell pmf (its mass outside the walk
            # is below 2^-(S - 1) of the walked mass: inside the bookkeeping slack)
            log_cuts.append(_finite(log_cut - log_total))
            offset, scale = lo_w[a:b] + first, log_rescale - log_total
            del first, n_walk, log_cut, log_total, log_rescale, best, remainder, unwalked
            leaf_offsets.append(offset)
            leaf_lengths.append(lengths)
            store.append(leaf_hi, leaf_lo, leaves=True)
            if not fuse:
                cur_hi, cur_lo, cur_lengths, cur_offsets, cur_scale = (
                    leaf_hi, leaf_lo, lengths, offset, scale
                )  # fmt: skip
                continue
            if b - a > 1:  # a last chunk of one cell has no pair
                *piece, cuts, piece_ops, piece_done = _pair_up(
                    leaf_hi, leaf_lo, lengths, offset, scale, total, tail, parallel
                )
                for part, values in zip(up, piece, strict=True):
                    part.append(values)
                log_cuts.append(cuts)
                ops += piece_ops
                done += piece_done
                del piece
            if (b - a) % 2:  # the odd leaf out (the last) is carried up unchanged
                at = int(np.sum(lengths[:-1]))
                carried = [leaf_hi[at:].copy(), leaf_lo[at:].copy(), lengths[-1:],
                           offset[-1:], scale[-1:]]  # fmt: skip
            del leaf_hi, leaf_lo, lengths, offset, scale
        del s_hi, s_lo, rho_hi, rho_lo, hi_w, lo_w, clamped
        # per node id: offsets, lengths; values level by level in id order (the store)
        offsets, node_lengths = [np.concatenate(leaf_offsets)], [np.concatenate(leaf_lengths)]
        del leaf_offsets, leaf_lengths
        # the current level: its node ids and, contiguous in level order, their values
        level = np.arange(n_cells, dtype=np.int64)
        levels: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        n_nodes, n_splits, log_event = n_cells, 0, 0.0
        work = _tree_work(node_lengths[0], total)
        _report(progress, 0.0)
        if fuse:
            n_pairs = n_cells // 2
            for part, values in zip(up, carried, strict=False):
                part.append(values)
            cur_hi, cur_lo = _join(up[0]), _join(up[1])  # each piece freed once copied
            cur_lengths, cur_offsets, cur_scale = (np.concatenate(part) for part in up[2:])
            del up, carried
            made = int(np.sum(cur_lengths[:n_pairs]))  # the new nodes' values (a view)
            store.append(cur_hi[:made], cur_lo[:made])
            offsets.append(cur_offsets[:n_pairs])
            node_lengths.append(cur_lengths[:n_pairs])
            parents = np.arange(n_nodes, n_nodes + n_pairs, dtype=np.int64)
            n_splits += n_pairs
            n_nodes += n_pairs
            lefts = np.arange(0, 2 * n_pairs, 2, dtype=np.int64)
            level = _close_level(level, parents, level[lefts], level[lefts + 1], levels)
            _report(progress, min(done / work, 0.99))
        while level.size > 1:
            n_pairs = level.size // 2
            lefts = np.arange(0, 2 * n_pairs, 2, dtype=np.int64)  # positions in the level
            if level.size == 2:  # the root: only its value at y. is ever needed
                scale = cur_scale[:1] + cur_scale[1:]
                a = slice(0, cur_lengths[0])
                b = slice(cur_lengths[0], cur_lengths[0] + cur_lengths[1])
                value_hi, value_lo = td.dot_dd(
                    cur_hi[a], cur_lo[a], cur_hi[b], cur_lo[b],
                    total - int(cur_offsets[0] + cur_offsets[1]),
                )  # fmt: skip
                if not value_hi > 0.0:
                    raise RuntimeError(
                        "the conditioning event sum z = y. has no mass inside the kept "
                        "windows; the tilt failed (please report this calibration)"
                    )
                shift = int(np.frexp(value_hi)[1])
                new_hi = np.array([np.ldexp(value_hi, -shift)])
                new_lo = np.array([np.ldexp(value_lo, -shift)])
                new_lengths = np.ones(1, np.int64)
                new_offsets = np.array([total], np.int64)
                new_scale = scale + shift * log2
                log_event = float(scale[0]) + float(np.log(value_hi))
            else:
                new_hi, new_lo, new_lengths, new_offsets, new_scale, cuts, level_ops, level_done = (
                    _pair_up(
                        cur_hi, cur_lo, cur_lengths, cur_offsets, cur_scale, total, tail, parallel
                    )
                )
                log_cuts.append(cuts)
                ops += level_ops
                done += level_done
                _report(progress, min(done / work, 0.99))
            store.append(new_hi, new_lo)
            offsets.append(new_offsets)
            node_lengths.append(new_lengths)
            parents = np.arange(n_nodes, n_nodes + n_pairs, dtype=np.int64)
            n_splits += n_pairs
            n_nodes += n_pairs
            if level.size % 2:  # the odd node out is carried up unchanged, last
                tail_at = int(np.sum(cur_lengths[:-1]))
                cur_hi = np.concatenate([new_hi, cur_hi[tail_at:]])
                cur_lo = np.concatenate([new_lo, cur_lo[tail_at:]])
                cur_lengths = np.append(new_lengths, cur_lengths[-1])
                cur_offsets = np.append(new_offsets, cur_offsets[-1])
                cur_scale = np.append(new_scale, cur_scale[-1])
            else:
                cur_hi, cur_lo = new_hi, new_lo
                cur_lengths, cur_offsets, cur_scale = new_lengths, new_offsets, new_scale
            level = _close_level(level, parents, level[lefts], level[lefts + 1], levels)
        _report(progress, 1.0)
        self.log_event_probability = float(log_event)
        # q(not A) <= (sum of cut masses) / P(sum = y., A); the slack covers the double
        # bookkeeping of the masses (module docstring, step 5)
        cut = math.fsum(np.exp(np.concatenate(log_cuts) - log_event).tolist())
        self.cut_bound = float(cut * (1.0 + _BOOKKEEPING_SLACK))
        log_ratio = -np.log1p(-td.DD_OP_ERROR) * (ops + 2 * n_splits)
        self.rounding_bound = float(np.expm1(2.0 * log_ratio) * (1.0 + _BOOKKEEPING_SLACK))
        self.tv_bound = self.cut_bound + self.rounding_bound
        del cur_hi, cur_lo, new_hi, new_lo, log_cuts
        values_hi, values_lo = store.finish()
        self._spilled = store.maps
        self._store_flat(
            values_hi,
            values_lo,
            np.concatenate(node_lengths),
            np.concatenate(offsets),
            levels,
            int(level[0]),
        )

    def _store_flat(self, values_hi, values_lo, lengths, offsets, levels, root) -> None:
        """The tree in the flat layout the compiled draws read, from flat arrays."""
        self._offsets = np.asarray(offsets, dtype=np.int64)
        self._lengths = np.asarray(lengths, dtype=np.int64)
        self._starts = np.concatenate([[0], np.cumsum(self._lengths)[:-1]]).astype(np.int64)
        self._values = values_hi
        self._values_lo = values_lo
        top_down = levels[::-1]
        empty = np.empty(0, np.int64)
        self._parents, self._lefts, self._rights = (
            np.concatenate([empty] + [level[part] for level in top_down]).astype(np.int64)
            for part in range(3)
        )
        # the levels (bottom-up) as views of the arrays above: one copy of the node ids
        ends = np.cumsum([0] + [level[0].size for level in top_down])
        self._levels = [
            tuple(part[a:b] for part in (self._parents, self._lefts, self._rights))
            for a, b in zip(ends[:-1], ends[1:], strict=True)
        ][::-1]
        del levels[:]
        self._pmfs = None  # marginal_pmfs reads the hi parts through _node_pmf
        self._root = root

    # --- drawing -----------------------------------------------------------------------
    def draw(self, size: int, rng: np.random.Generator) -> np.ndarray:
        """``size`` exact draws of z: int64 array (size, I), every row summing to y."""
        if not isinstance(rng, np.random.Generator):
            raise TypeError(f"rng must be a numpy.random.Generator, got {type(rng)}")
        if int(size) != size or size < 0:
            raise ValueError(f"size must be a non-negative integer, got {size}")
        size = int(size)
        if self.total == 0:
            return np.zeros((size, self.n_cells), dtype=np.int64)
        # imported here: numba takes a third of a second to import, and only draws need it
        from dpcounts.sampling.tree_draw import draw_tree, draw_tree_exact

        tree = (
            size,
            self.total,
            self._root,
            self._parents,
            self._lefts,
            self._rights,
            self._offsets,
            self._starts,
            self._lengths,
            self._values,
        )
        if self.release and self._spilled is not None:
            return self._draw_spilled(size, rng)
        if self.release:
            return draw_tree_exact(*tree, self._values_lo, self.n_cells, rng)
        return draw_tree(*tree, self.n_cells, rng)

    def _draw_spilled(self, size: int, rng: np.random.Generator) -> np.ndarray:
        """:func:`~dpcounts.sampling.tree_draw.draw_tree_exact` of a tree in its spill file,
        one level of splits at a time (the same splits in the same order, so the same draws
        from the same ``rng``): after each level the map's pages are released, so the
        process holds one level of the tree at a time, not the file (:class:`Spill`)."""
        import mmap

        from dpcounts.sampling.tree_draw import draw_splits_exact

        out = np.empty((size, self.n_cells), dtype=np.int64)
        node_value = np.empty(self._offsets.size, dtype=np.int64)
        widest = int(self._lengths.max()) + 1
        w_hi, w_lo = np.empty(widest), np.empty(widest)
        ends = np.cumsum([0] + [level[0].size for level in self._levels[::-1]])
        arrays = (self._parents, self._lefts, self._rights, self._offsets, self._starts,
                  self._lengths, self._values, self._values_lo)  # fmt: skip
        for d in range(size):
            node_value[self._root] = self.total
            for a, b in zip(ends[:-1], ends[1:], strict=True):
                draw_splits_exact(int(a), int(b), node_value, *arrays, w_hi, w_lo, rng)
                for values in self._spilled:  # the pages stay in the file, not in us
                    values._mmap.madvise(mmap.MADV_DONTNEED)
            out[d] = node_value[: self.n_cells]
        return out

    # --- exact summaries ---------------------------------------------------------------
    def marginal_pmfs(self) -> list[tuple[int, np.ndarray]]:
        """Each cell's exact marginal pmf under the tree's distribution: (offset, pmf).

        Computed by the downward (outside) pass: outside(child) = outside(parent)
        correlated with the sibling's pmf, starting from a point mass at y. at the root.
        """
        if self.total == 0:
            return [(0, np.ones(1)) for _ in range(self.n_cells)]
        outside: dict[int, np.ndarray] = {}
        root_weight = np.zeros(self._node_pmf(self._root).size)
        root_weight[self.total - self._offsets[self._root]] = 1.0
        outside[self._root] = root_weight
        for parents, lefts, rights in reversed(self._levels):
            for parent, left, right in zip(parents, lefts, rights, strict=True):
                weight = outside.pop(parent)
                if right < 0:
                    outside[left] = weight
                    continue
                outside[left] = self._outside(weight, parent, right, left)
                outside[right] = self._outside(weight, parent, left, right)
        result = []
        for cell in range(self.n_cells):
            joint = self._node_pmf(cell) * outside[cell]
            result.append((int(self._offsets[cell]), joint / joint.sum()))
        return result

    def _node_pmf(self, node: int) -> np.ndarray:
        """Node's stored pmf (release mode: the hi parts of its double-doubles)."""
        if self._pmfs is not None:
            return self._pmfs[node]
        start = self._starts[node]
        return self._values[start : start + self._lengths[node]]

    def _outside(self, weight, parent, sibling, child) -> np.ndarray:
        from scipy.signal import fftconvolve

        """outside(child)(k) = sum_r outside(parent)(k + r) * sibling(r), on child's window."""
        reversed_sibling = self._node_pmf(sibling)[::-1]
        if min(weight.size, reversed_sibling.size) <= _DIRECT_CONVOLVE:
            corr = np.convolve(weight, reversed_sibling)
        else:
            corr = np.clip(fftconvolve(weight, reversed_sibling), 0.0, None)
        # corr[m] belongs to k = off_parent - off_sibling - (len_sibling - 1) + m
        first_k = self._offsets[parent] - self._offsets[sibling] - (reversed_sibling.size - 1)
        shift = self._offsets[child] - first_k
        out = np.zeros(self._node_pmf(child).size)
        lo, hi = max(0, -shift), min(out.size, corr.size - shift)
        if hi > lo:
            out[lo:hi] = corr[shift + lo : shift + hi]
        peak = out.max()
        return out / peak if peak > 0 else out

    def marginal_means(self) -> np.ndarray:
        """Each cell's exact expected synthetic count E[z_k] under the tree's distribution."""
        return np.array(
            [np.dot(off + np.arange(pmf.size), pmf) for off, pmf in self.marginal_pmfs()]
        )


def public_rounding_bound(cal: Calibration) -> float:
    """An upper bound on the :attr:`~ConditionedSampler.rounding_bound` of *every*
    release-mode sampler of ``cal``, whatever the counts: a function of the calibration only.

    The rounding term counts the double-double operations along the tree (module docstring,
    step 3): per leaf ``LEAF_OPS_PER_STEP * (walked - 1) + 1``, per non-root internal node
    ``min(len(left), len(right)) + 2``, and two per split. The counts enter only through
    how far a leaf's walk goes (it may stop early) and where the tails are cut, both of which
    only *shorten* the pmfs; the full public windows (``[L_k, min(U_k, y.)]``, untruncated
    ``[0, y.]``) and the uncut convolution lengths (capped at y. + 1) give the most
    operations any dataset can need. A target below this bound can be missed for some
    counts and met for a neighbour (a data-dependent refusal), so a release checks it
    first (:meth:`dpcounts.release.design.Design.check_tv_target`).
    """
    total, n_cells = int(cal.total), cal.n_cells
    if n_cells == 1 or total == 0:
        return 0.0
    lower, upper = check_feasible(cal)
    if cal.truncated:
        widths = (upper - lower + 1).astype(np.int64)
    else:
        widths = np.full(n_cells, total + 1, dtype=np.int64)
    return _rounding_bound_of(widths, total)


def largest_epsilon(delta_per_set: float, floor: float) -> float:
    """The largest epsilon per set whose sampler target, ``delta_per_set / (1 +
    e^epsilon)``, is at least twice ``floor`` (a rounding bound: :func:`least_rounding_bound`
    for any calibration of a table); -inf where no epsilon >= 0 is, inf where the floor is 0.
    A release refuses an epsilon above it (:meth:`dpcounts.release.design.Design.tv_fix`
    says so in numbers); a study's guide names no epsilon above it."""
    if floor <= 0.0:
        return math.inf
    ratio = delta_per_set / (2.0 * floor)
    return math.log(ratio - 1.0) if ratio > 2.0 else -math.inf


def window_rounding_bound(total: int, lower=None, upper=None, n_cells: int = 0) -> float:
    """:func:`public_rounding_bound` from a calibration's public windows alone: the bounds
    ``lower`` and ``upper`` of a truncated one, or (None) the full windows ``[0, total]``
    of ``n_cells`` untruncated strata. For a study, which keeps its calibrations as tables."""
    if lower is None:
        if n_cells <= 1 or total <= 0:
            return 0.0
        return _rounding_bound_of(np.full(n_cells, total + 1, dtype=np.int64), int(total))
    lower = np.asarray(lower, dtype=np.int64)
    if lower.size <= 1 or total <= 0:
        return 0.0
    upper = np.minimum(np.asarray(upper, dtype=np.int64), int(total))
    return _rounding_bound_of(upper - lower + 1, int(total))


def least_rounding_bound(n_cells: int, total: int) -> float:
    """A lower bound on :func:`public_rounding_bound` over every calibration of ``n_cells``
    strata and ``total``, whatever the prior: every window one value wide (the fewest
    operations a tree of that many leaves does). A sampler's target below twice it is
    refused for any prior, so a release with a sanitised prior checks it before drawing
    the prior (:meth:`dpcounts.release.design.Design.check_without_prior`)."""
    if n_cells <= 1 or total <= 0:
        return 0.0
    return _rounding_bound_of(np.ones(n_cells, dtype=np.int64), int(total))


def _rounding_bound_of(widths, total: int) -> float:
    """The rounding bound of a tree whose leaves have these ``widths`` (vectorised, in exact
    integers: the same operations counted as the build's loop over pairs)."""
    from dpcounts.sampling import tree_draw as td

    level = np.asarray(widths, dtype=np.int64)
    ops = int(np.sum(td.LEAF_OPS_PER_STEP * (level - 1) + 1))
    splits = 0
    while level.size > 1:
        n_pairs = level.size // 2
        left, right = level[0 : 2 * n_pairs : 2], level[1 : 2 * n_pairs : 2]
        if level.size > 2:  # the root forms only its value at y.: no convolution counted
            ops += int(np.sum(np.minimum(left, right) + 2))
        merged = np.minimum(left + right - 1, total + 1)
        if level.size % 2:
            merged = np.append(merged, level[-1])
        splits += n_pairs
        level = merged
    log_ratio = -np.log1p(-td.DD_OP_ERROR) * (ops + 2 * splits)
    return float(np.expm1(2.0 * log_ratio) * (1.0 + _BOOKKEEPING_SLACK))


def release_tails(n_cells: int, total: int, tv_target: float) -> tuple[float, ...]:
    """The tails :func:`release_sampler` tries, in order: :data:`RELEASE_TAILS` without
    those too large to meet ``tv_target`` for any table of this size, by two orders of
    magnitude.

    A tree of n cells has 2n - 1 nodes, each cutting at most twice ``tail`` of its mass,
    and the conditioning event has probability about 1 / sqrt(2 pi Var), Var of the order
    of y.; so the cut bound is of the order of 4 n tail sqrt(2 pi y.) (what a build
    measures is smaller, as most cuts are). A tail whose forecast exceeds the target a
    hundredfold is not built (each build of a national table costs seconds). The choice
    uses public numbers only, and any tail gives a sampler within the target or none, so
    which tails are tried changes the cost, not the guarantee.
    """
    forecast = 4.0 * max(n_cells, 1) * math.sqrt(2.0 * math.pi * max(total, 1))
    kept = tuple(t for t in RELEASE_TAILS if forecast * t <= 100.0 * tv_target)
    return kept or RELEASE_TAILS[-1:]


def release_sampler(
    y, cal: Calibration, tv_target: float, progress=None, spill: Spill | None = None
) -> ConditionedSampler:
    """A release-mode sampler whose :attr:`~ConditionedSampler.tv_bound` is at most ``tv_target``.

    Builds ``ConditionedSampler(y, cal, tail=t, release=True)`` for t in
    :func:`release_tails` (from :data:`RELEASE_TAILS`: 1e-16, then ever smaller, down to 0:
    only the 2^-400 floor) and returns the first whose rigorous total-variation bound meets
    the target. ``progress`` is passed to each build. A tail whose
    cuts leave the conditioning event no mass (the build raises ``RuntimeError``; where that
    happens depends on the counts, through the tilt and the cells' shapes) is skipped like
    one whose bound is too large: the next, smaller tail keeps more of every node. Raises
    ValueError when no tail does (the bound's floor is set by the rounding term, the
    2^-400 cuts and the conditioning event's probability; see the module docstring).
    """
    target = float(tv_target)
    if not (np.isfinite(target) and target > 0.0):
        raise ValueError(f"tv_target must be a finite number > 0, got {tv_target!r}")
    reached, last, failure = [], None, None
    for tail in release_tails(cal.n_cells, cal.total, target):
        try:  # a tree built before (a larger tail) was freed: one tree in memory at a time
            sampler = ConditionedSampler(
                y, cal, tail=tail, release=True, progress=progress, spill=spill
            )
        except RuntimeError as err:  # the cuts removed the whole conditioning event: cut less
            failure = err
            continue
        if sampler.tv_bound <= target:
            return sampler
        reached.append(sampler.tv_bound)
        last = (sampler.rounding_bound, sampler.cut_bound, sampler.log_event_probability)
        del sampler
    if last is None:
        raise ValueError(
            f"release_sampler: no tail in {RELEASE_TAILS} gives a sampler ({failure}); "
            "please report this calibration"
        )
    raise ValueError(
        f"release_sampler: no tail in {RELEASE_TAILS} brings the total-variation bound to "
        f"tv_target={target:.3g}; the smallest bound reached is {min(reached):.3g} "
        f"(rounding term {last[0]:.3g}, cut term {last[1]:.3g}, "
        f"log P(sum = y.) = {last[2]:.3g}). Ask for a larger target."
    )
