"""Exact sampler of the discrete Laplace (two-sided geometric) distribution.

The discrete Laplace with scale ``t > 0`` is the distribution on the integers with

    P(k) = (1 - q) / (1 + q) * q^|k|,   q = exp(-1 / t),

i.e. P(k) proportional to exp(-|k| / t). Adding it with scale Delta / eps to an integer
statistic of L1 sensitivity Delta is eps-DP (Ghosh, Roughgarden and Sundararajan 2012).

The sampler follows Canonne, Kamath and Steinke (2020), "The Discrete Gaussian for
Differential Privacy", sec 5: Algorithm 1 (Bernoulli(exp(-gamma)) for rational gamma) and
Algorithm 2 (discrete Laplace for a rational scale t / s). It is written from the
paper, vectorised over NumPy arrays, and uses only

- exact integer and rational arithmetic (Python ``int`` / ``fractions.Fraction``; NumPy
  ``int64`` only where the values provably fit, Python integers in object arrays
  otherwise), and
- uniform integers from the caller's ``numpy.random.Generator``: ``rng.integers(0, n)``
  for n <= 2**63, which NumPy computes from the bit generator's raw 32/64-bit words by
  Lemire's rejection method (Lemire 2019, cited in ``Generator.integers``); rejection
  makes it exactly uniform on {0, ..., n - 1} whenever the raw words are uniform. For
  n > 2**63 (a small epsilon can give a scale whose numerator does), ``ceil(log2 n)`` raw
  bits are assembled from full-range 64-bit words (``rng.integers(0, 2**64,
  dtype=uint64)``, the raw output) and values >= n are rejected, again exactly uniform.

No floating-point number is drawn or computed on the sampling path (floats appear only
in the choice of batch sizes, which does not affect the distribution). So the output
distribution is exactly the discrete Laplace with the given rational scale, up to the
quality of the bit generator (in releases: ChaCha with 20 rounds from ``randomgen``).

Use :func:`scale_for` to get the exact rational scale Delta / eps of a float epsilon:
``Fraction(eps)`` is the exact value of the binary float, so the mechanism is eps-DP for
exactly the epsilon that is recorded.

Like any rejection sampler its running time is random (it depends on the draws and the
scale, not on the data the noise is added to, but the noise is secret): it is not
constant-time, so its timings must not be published.

Measured (``.venv/bin/python benchmarks/discrete_laplace.py``, 2 shared AMD EPYC cores):
0.16-0.30 microseconds a draw in batches of 10^5 for scales 1 to 10^4 (2/0.3 included),
with PCG64 and with ChaCha(rounds=20) alike, i.e. 10^5 draws in 20-30 ms; about 3
microseconds a draw when the scale's numerator exceeds 2**63 (Python integers; with
Delta = 2 that happens for many epsilons below 0.001, e.g. 0.0006 and 1e-5, depending
on the float's binary digits). Each call also costs about 0.3 ms whatever its size, so
draw many values per call. Issue #28 (same draws, less array work: ``np.compress`` for
large boolean selections, fewer temporaries) measured 1.6x on the same machine: 0.05-0.06
microseconds a draw in batches of 10^5 against 0.08-0.09 before, and 0.08-0.10 ms a call
of 1 to 49 draws against 0.10-0.13 (PCG64).
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction

import numpy as np

_INT64_MAX = 2**63 - 1
_NUMPY_BOUND = 2**63  # rng.integers(0, n, dtype=int64) accepts n up to 2**63
# Bernoulli(exp(-1)) trials per geometric V: E[V + 1] = 1 / (1 - exp(-1)) ~ 1.582, plus slack.
_POOL_PER_GEOMETRIC = 1.05 / -math.expm1(-1.0)


def _as_positive_fraction(value, name: str) -> Fraction:
    if isinstance(value, bool):
        raise TypeError(f"{name} must be a number, got {value!r}")
    if isinstance(value, float | np.floating) and not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value!r}")
    try:
        fraction = Fraction(value)
    except (TypeError, ValueError) as err:
        raise TypeError(f"{name} must be a rational number, got {value!r}") from err
    if fraction <= 0:
        raise ValueError(f"{name} must be > 0, got {value!r}")
    return fraction


def scale_for(epsilon: float, sensitivity: int | Fraction = 1) -> Fraction:
    """The exact scale Delta / eps, with eps = ``Fraction(epsilon)`` the float's exact value.

    The discrete Laplace with this scale added to a statistic of L1 sensitivity Delta is
    exactly ``epsilon``-DP (no rounding of epsilon or of the scale anywhere).
    """
    eps = _as_positive_fraction(epsilon, "epsilon")
    delta = _as_positive_fraction(sensitivity, "sensitivity")
    return delta / eps


# --- selections ------------------------------------------------------------------------------
#: Above this many values a boolean selection is made by ``np.compress`` (several times
#: faster than indexing with the mask there; slower on small arrays).
_COMPRESS_FROM = 2048


def _select(mask: np.ndarray, values: np.ndarray) -> np.ndarray:
    """``values[mask]`` (1-D), by whichever of the two equal ways is faster at this size."""
    return np.compress(mask, values) if values.size >= _COMPRESS_FROM else values[mask]


# --- uniform integers ----------------------------------------------------------------------
def _uniform_below(n: int, size: int, rng: np.random.Generator) -> np.ndarray:
    """``size`` iid uniform integers on {0, ..., n - 1} (int64 if n <= 2**63, else object)."""
    if n <= _NUMPY_BOUND:
        return rng.integers(0, n, size=size, dtype=np.int64)
    bits = (n - 1).bit_length()
    words = -(-bits // 64)
    surplus = 64 * words - bits
    out = np.empty(size, dtype=object)
    filled = 0
    while filled < size:
        need = size - filled
        raw = rng.integers(0, 2**64, size=(need, words), dtype=np.uint64)
        value = raw[:, 0].astype(object)
        for column in range(1, words):
            value = (value << 64) | raw[:, column].astype(object)
        if surplus:
            value = value >> surplus  # the top `bits` bits: uniform on [0, 2**bits)
        accepted = value[value < n]  # rejection: uniform on [0, n); acceptance > 1/2
        out[filled : filled + accepted.size] = accepted
        filled += accepted.size
    return out


def _bernoulli_reciprocal(k: int, size: int, rng: np.random.Generator) -> np.ndarray:
    """Bernoulli(1/k) for an integer k >= 2 (uniform on {0, ..., k - 1} equal to 0)."""
    return rng.integers(0, k, size=size, dtype=np.int64) == 0


# --- Bernoulli(exp(-gamma)) ------------------------------------------------------------------
def _bernoulli_exp_unit(numerator: np.ndarray, denominator: int, rng) -> np.ndarray:
    """Bernoulli(exp(-gamma_i)), gamma_i = numerator_i / denominator in [0, 1] (CKS Alg. 1).

    Draw A_k ~ Bernoulli(gamma / k) for k = 1, 2, ... until the first A_k = 0; return 1 iff
    that k is odd. P(first zero at k) = gamma^(k-1)/(k-1)! - gamma^k/k!, whose sum over odd k
    is sum_j (-gamma)^j / j! = exp(-gamma). Bernoulli(gamma / k) is drawn as the product of
    the independent Bernoulli(1/k) and Bernoulli(numerator / denominator), the latter as
    [W < numerator] with W uniform on {0, ..., denominator - 1} (drawn only where the
    Bernoulli(1/k) is 1: the product is 0 otherwise).
    """
    size = numerator.shape[0]
    # k = 1: A_1 ~ Bernoulli(gamma); a first zero here (k odd) returns 1.
    a = _uniform_below(denominator, size, rng) < numerator
    result = ~a
    alive = a.nonzero()[0]  # indices with A_1 = ... = A_(k-1) = 1 (result False)
    k = 2
    while alive.size:
        a = _bernoulli_reciprocal(k, alive.size, rng)
        hit = a.nonzero()[0]
        if hit.size:  # (a call for no values would draw nothing: skipped)
            a[hit] = _uniform_below(denominator, hit.size, rng) < numerator[alive[hit]]
        if k % 2:
            result[alive] = ~a  # first zero at an odd k: 1 (at an even k: stays 0)
        alive = _select(a, alive)
        k += 1
    return result


def _bernoulli_exp_minus_one(size: int, rng: np.random.Generator) -> np.ndarray:
    """Bernoulli(exp(-1)): Algorithm 1 with gamma = 1 (A_k ~ Bernoulli(1/k))."""
    # A_1 ~ Bernoulli(1) is always 1; a first zero at k = 2 (even) returns 0.
    a = _bernoulli_reciprocal(2, size, rng)
    result = np.zeros(size, dtype=bool)
    alive = a.nonzero()[0]
    k = 3
    while alive.size:
        a = _bernoulli_reciprocal(k, alive.size, rng)
        if k % 2:
            result[alive] = ~a  # first zero at an odd k: 1 (the others stay 0 so far)
        alive = _select(a, alive)
        k += 1
    return result


def _geometric_exp_minus_one(size: int, rng: np.random.Generator) -> np.ndarray:
    """``size`` iid V, P(V = v) = exp(-v) (1 - exp(-1)), v = 0, 1, ...

    V is the number of successes of Bernoulli(exp(-1)) before the first failure. One iid
    stream of such trials is drawn in pools and cut after each failure; the run lengths
    of the consecutive pieces are iid copies of V (successes left at the end of a pool
    continue into the next one).
    """
    out = np.empty(size, dtype=np.int64)
    filled = 0
    carry = 0  # successes since the last failure, carried over from the previous pool
    while filled < size:
        need = size - filled
        pool = _bernoulli_exp_minus_one(int(need * _POOL_PER_GEOMETRIC) + 16, rng)
        failures = np.logical_not(pool).nonzero()[0]
        if failures.size:
            runs = np.empty_like(failures)  # gaps between failures: np.diff(prepend=-1) - 1
            runs[0] = failures[0] + carry
            np.subtract(failures[1:], failures[:-1], out=runs[1:])
            runs[1:] -= 1
            take = min(runs.size, need)
            out[filled : filled + take] = runs[:take]
            filled += take
            carry = pool.size - 1 - int(failures[-1])
        else:
            carry += pool.size
    return out


def bernoulli_exp(gamma, size: int, rng: np.random.Generator) -> np.ndarray:
    """``size`` exact Bernoulli(exp(-gamma)) draws (bool) for a rational gamma >= 0.

    CKS Algorithm 1: for gamma in [0, 1] the alternating-series sampler; for gamma > 1,
    floor(gamma) independent Bernoulli(exp(-1)) and one Bernoulli(exp(-(gamma -
    floor(gamma)))), all of which must succeed. ``gamma`` is converted exactly with
    ``Fraction`` (a float is taken at its exact binary value).
    """
    gamma = Fraction(gamma)
    if gamma < 0:
        raise ValueError(f"gamma must be >= 0, got {gamma}")
    size = int(size)
    alive = np.arange(size)
    whole = math.floor(gamma)
    for _ in range(whole):
        if not alive.size:
            break
        alive = _select(_bernoulli_exp_minus_one(alive.size, rng), alive)
    fraction = gamma - whole
    if alive.size and fraction:
        dtype = np.int64 if fraction.denominator <= _NUMPY_BOUND else object
        numerator = np.full(alive.size, fraction.numerator, dtype=dtype)
        alive = _select(_bernoulli_exp_unit(numerator, fraction.denominator, rng), alive)
    out = np.zeros(size, dtype=bool)
    out[alive] = True
    return out


# --- discrete Laplace --------------------------------------------------------------------------
@functools.lru_cache(maxsize=1024)
def _acceptance(t: int, s: int) -> float:
    """Probability that one pass of Algorithm 2 returns (for batch sizing only)."""
    inv_t = float(Fraction(1, t))
    p_first = -math.expm1(-1.0)  # P(D = 1) = (1 - e^-1) / (t (1 - e^(-1/t))) -> 1 - e^-1
    if inv_t > 0:
        p_first /= -math.expm1(-inv_t) / inv_t
    c = float(min(Fraction(s, t), Fraction(1000)))
    return p_first * (1.0 + math.exp(-c)) / 2.0  # times P(not (B = 1 and Y = 0))


def _floor_of_ratio(u: np.ndarray, v: np.ndarray, t: int, s: int) -> np.ndarray:
    """floor((U + t V) / s), exactly: int64 where every value provably fits, else Python ints.

    With t = q s + r and U = q_U s + r_U: U + t V = s (q_U + q V) + (r_U + r V), where
    0 <= r_U + r V < s (V + 1), so the result is q_U + q V + floor((r_U + r V) / s) and
    never exceeds (q + 1)(V + 1); no intermediate exceeds max(s (V + 1), (q + 1)(V + 2)).
    """
    q, r = divmod(t, s)
    v_max = int(v.max(initial=0))
    if u.dtype != object and s * (v_max + 1) <= _INT64_MAX and (q + 1) * (v_max + 2) <= _INT64_MAX:
        # The same integers, in place (U >= 0: U // s and U - s (U // s) are divmod(U, s)).
        q_u = u // s
        work = np.multiply(q_u, s)
        np.subtract(u, work, out=work)  # r_U
        out = np.multiply(v, r)
        out += work
        out //= s  # floor((r_U + r V) / s)
        out += q_u
        np.multiply(v, q, out=work)
        out += work  # + q V
        return out
    return (u.astype(object) + t * v.astype(object)) // s


def sample_discrete_laplace(scale, size, rng: np.random.Generator) -> np.ndarray:
    """Exact draws (int64) from P(k) proportional to exp(-|k| / scale), scale rational > 0.

    CKS Algorithm 2 with scale = t / s (t, s coprime positive integers). One pass:

    1. U uniform on {0, ..., t - 1}; D ~ Bernoulli(exp(-U / t)); if D = 0 start again;
    2. V ~ Geometric: the number of successes of Bernoulli(exp(-1)) before a failure;
    3. X = U + t V (X is geometric: P(X = x) proportional to exp(-x / t));
       Y = floor(X / s) (geometric: P(Y = y) proportional to exp(-y s / t));
    4. B ~ Bernoulli(1/2); if B = 1 and Y = 0 start again; return (1 - 2B) Y.

    Passes are iid, so keeping the first ``size`` successful passes of a batch gives iid
    draws. ``scale`` is converted with ``Fraction`` (pass a ``Fraction``; a float is taken
    at its exact binary value). Raises ``OverflowError`` if a draw does not fit in int64
    (possible only for scales near 10^17 and above).
    """
    if not (type(scale) is Fraction and scale > 0):  # a positive Fraction is taken as it is
        scale = _as_positive_fraction(scale, "scale")
    t, s = scale.numerator, scale.denominator
    if size is None:
        shape = ()
    elif type(size) is int:
        shape = (size,)
    else:
        shape = tuple(np.atleast_1d(np.asarray(size, dtype=np.int64)))
    total = math.prod(shape)
    out = np.empty(total, dtype=np.int64)
    acceptance = _acceptance(t, s)
    filled = 0
    while filled < total:
        need = total - filled
        batch = int(need / acceptance * 1.05) + 16
        u = _uniform_below(t, batch, rng)
        u = _select(_bernoulli_exp_unit(u, t, rng), u)
        v = _geometric_exp_minus_one(u.size, rng)
        y = _floor_of_ratio(u, v, t, s)
        b = rng.integers(0, 2, size=y.size, dtype=np.int8)  # B
        keep = y != 0
        keep |= b == 0  # not (B = 1 and Y = 0)
        y = _select(keep, y)
        if y.dtype == object:
            try:
                y = y.astype(np.int64)
            except OverflowError as err:
                raise OverflowError(
                    f"a discrete Laplace draw at scale {float(scale):.3g} exceeds the int64 range"
                ) from err
        sign = _select(keep, b)
        sign *= -2
        sign += 1
        draws = np.multiply(y, sign, out=y)  # (1 - 2B) Y
        take = min(draws.size, need)
        out[filled : filled + take] = draws[:take]
        filled += take
    return out.reshape(shape)


def discrete_laplace_log_pmf(k, scale) -> np.ndarray:
    """log P(k) = -|k| / scale + log((1 - q) / (1 + q)), q = exp(-1 / scale), in float64.

    ``1 / scale`` is computed exactly and rounded once; log((1-q)/(1+q)) = log tanh(c/2)
    (c = 1/scale) is evaluated in the form that is accurate for small and large c.
    """
    scale = _as_positive_fraction(scale, "scale")
    c = float(1 / scale)
    if c < 1.0:
        log_norm = math.log(math.tanh(c / 2.0))
    else:
        q = math.exp(-c)
        log_norm = math.log1p(-2.0 * q / (1.0 + q))
    k = np.abs(np.asarray(k, dtype=float))
    return -k * c + log_norm


def discrete_laplace_pmf(k, scale) -> np.ndarray:
    """P(k) of the discrete Laplace with the given scale (float64)."""
    return np.exp(discrete_laplace_log_pmf(k, scale))


#: L1 sensitivity of a count vector under move-one-event neighbours: ||x - y||_1 = 2.
SENSITIVITY = 2


def _check_epsilon(epsilon: float) -> float:
    if not (np.isfinite(epsilon) and epsilon > 0):
        raise ValueError(f"epsilon must be a finite number > 0, got {epsilon!r}")
    return float(epsilon)


def geometric_noise(
    epsilon: float, size, rng: np.random.Generator, sensitivity: float = SENSITIVITY
) -> np.ndarray:
    """Exact two-sided geometric draws (int64): P(k) proportional to exp(-eps |k| / Delta).

    The noise of the geometric mechanism (Ghosh, Roughgarden and Sundararajan 2012; the
    baseline of Quick 2021, Section 4) and of the sanitised prior (Quick 2021, eq 19).
    Drawn by :func:`sample_discrete_laplace` (Canonne, Kamath and Steinke 2020) with the
    rational scale Delta / eps computed exactly from the float ``epsilon``
    (:func:`scale_for`): integer arithmetic and uniform integers from ``rng`` only, no
    floating-point sampling. Its pmf is :func:`discrete_laplace_log_pmf` at that scale.
    """
    epsilon = _check_epsilon(epsilon)
    if type(sensitivity) is int:  # the usual case: the exact scale, computed once
        scale = _scale_of(epsilon, sensitivity)
    else:
        scale = scale_for(epsilon, sensitivity)
    return sample_discrete_laplace(scale, size, rng)


@functools.lru_cache(maxsize=1024)
def _scale_of(epsilon: float, sensitivity: int) -> Fraction:
    """:func:`scale_for` of a float epsilon and an int sensitivity, kept (studies draw
    at the same few epsilons thousands of times)."""
    return scale_for(epsilon, sensitivity)
