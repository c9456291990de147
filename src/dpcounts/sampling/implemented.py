"""The distribution a sampler of :mod:`dpcounts.sampling.conditioned` really draws from,
exactly (small instances).

The sampler's privacy is that of the distribution its code implements, not of the ideal
q(z | y) of :mod:`dpcounts.sampling.enumeration`. This module evaluates the implemented one
exactly, in rational arithmetic, so the exact (epsilon, delta) of a release can be audited:

* :func:`implemented_pmf` lists the public support (every z of
  ``compositions(total, *cal.bounds())``) and, for each z, the probability that the
  sampler's draw returns it: the product over the tree's splits of the probability of the
  split that leads to z (0 where the code cannot reach z).

  - the release sampler (:class:`~dpcounts.sampling.release_mode.ReleaseSampler`): a
    split chooses k with probability exactly w_k / sum_m w_m, w the double-double products
    that :func:`~dpcounts.sampling.tree_draw.split_weights` forms (called here, so the weights
    are the draw's own), each turned into an exact :class:`~fractions.Fraction`;
  - the study sampler (:class:`~dpcounts.sampling.study_mode.StudySampler`): the split is
    a 53-bit inverse CDF (``rng.random() * mass`` against float cumulative sums,
    :func:`~dpcounts.sampling.tree_draw.draw_tree`). Its choice
    is a non-decreasing function of the 53-bit integer u behind ``rng.random()``, so the
    number of u giving each k is found by bisection: exact probabilities
    (count / 2^53), reproducing the float arithmetic of the compiled loop operation by
    operation (IEEE doubles; numba does not reassociate or fuse without fastmath).

* :func:`ideal_pmf` is q(z | y) itself in exact rational arithmetic: w_k(z) =
  prod_{j<z} (s_k + j) / z! * p_k^z with s_k = ~y_k + a_k and p_k = n_k / (b_k + 2 n_k)
  (1 for md) taken as the exact values of the calibration's doubles.
* :func:`hockey_stick` is sum_z max(0, P(z) - e^eps Q(z)), the smallest delta for which
  the pair (P, Q) satisfies (eps, delta), evaluated exactly and rounded up.

Everything here enumerates the support: only for small instances (I up to 4, totals of a
few tens).
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction

import numpy as np

from dpcounts.calibration import Calibration
from dpcounts.mechanisms.registry import family
from dpcounts.sampling.enumeration import compositions
from dpcounts.sampling.release_mode import ReleaseSampler

_TWO53 = 1 << 53
#: Largest support :func:`implemented_pmf` and :func:`ideal_pmf` agree to enumerate.
MAX_SUPPORT = 200_000


def _support(cal: Calibration) -> np.ndarray:
    lower, upper = cal.bounds()
    support = compositions(cal.total, lower, upper)
    if support.shape[0] > MAX_SUPPORT:
        raise ValueError(
            f"the support has {support.shape[0]} vectors, above MAX_SUPPORT={MAX_SUPPORT}: "
            "exact enumeration is for small instances"
        )
    return support


def _as_output(probs: list[Fraction], exact: bool) -> np.ndarray:
    if exact:
        out = np.empty(len(probs), dtype=object)
        out[:] = probs
        return out
    return np.array([float(p) for p in probs])


def implemented_pmf(sampler, *, exact: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """The support and the exact probability that ``sampler.draw`` returns each z.

    ``sampler`` is either sampler (:class:`~dpcounts.sampling.study_mode.StudySampler` or
    :class:`~dpcounts.sampling.release_mode.ReleaseSampler`). Returns (support rows z,
    probabilities): floats (each the nearest double of the exact value) or, with
    ``exact=True``, an object array of :class:`~fractions.Fraction`. The probabilities sum
    to exactly 1 over the support.
    """
    cal = sampler.calibration
    support = _support(cal)
    if sampler.total == 0 or sampler.n_cells == 1:
        return support, _as_output([Fraction(1)] * support.shape[0], exact)
    release = isinstance(sampler, ReleaseSampler)
    split = _ReleaseSplits(sampler) if release else _StudySplits(sampler)
    parents, lefts, rights = sampler._parents, sampler._lefts, sampler._rights
    n_nodes = sampler._offsets.size
    probs = []
    for z in support:
        value = np.zeros(n_nodes, dtype=np.int64)
        value[: sampler.n_cells] = z
        for j in range(parents.size - 1, -1, -1):  # bottom-up: children before parents
            value[parents[j]] = value[lefts[j]] + (value[rights[j]] if rights[j] >= 0 else 0)
        prob = Fraction(1)
        for j in range(parents.size):  # top-down, as the draw walks
            if rights[j] < 0:
                continue
            prob *= split.probability(
                lefts[j], rights[j], int(value[parents[j]]), int(value[lefts[j]])
            )
            if prob == 0:
                break
        probs.append(prob)
    return support, _as_output(probs, exact)


class _ReleaseSplits:
    """Exact split probabilities w_k / sum w of the release sampler, cached per (node, t)."""

    def __init__(self, sampler):
        from dpcounts.sampling.tree_draw import split_weights

        self._weights = split_weights
        self._s = sampler
        self._cache: dict[tuple[int, int, int], tuple[int, list[Fraction], Fraction]] = {}
        size = int(sampler._lengths.max()) + 1
        self._hi, self._lo = np.empty(size), np.empty(size)

    def probability(self, left: int, right: int, t: int, k: int) -> Fraction:
        key = (left, right, t)
        if key not in self._cache:
            s = self._s
            k_min, width = self._weights(
                left, right, t, s._offsets, s._starts, s._lengths, s._values, s._values_lo,
                self._hi, self._lo,
            )  # fmt: skip
            weights = [Fraction(self._hi[m]) + Fraction(self._lo[m]) for m in range(width)]
            self._cache[key] = (k_min, weights, sum(weights, Fraction(0)))
        k_min, weights, total = self._cache[key]
        if not 0 <= k - k_min < len(weights) or total == 0:
            return Fraction(0)
        return weights[k - k_min] / total


class _StudySplits:
    """Exact split probabilities of the study sampler's 53-bit inverse CDF."""

    def __init__(self, sampler):
        self._s = sampler
        self._cache: dict[tuple[int, int, int], tuple[int, list[Fraction]]] = {}

    def probability(self, left: int, right: int, t: int, k: int) -> Fraction:
        key = (left, right, t)
        if key not in self._cache:
            self._cache[key] = self._split(left, right, t)
        k_min, probs = self._cache[key]
        if not 0 <= k - k_min < len(probs):
            return Fraction(0)
        return probs[k - k_min]

    def _split(self, left: int, right: int, t: int) -> tuple[int, list[Fraction]]:
        # the arithmetic of tree_draw.draw_tree, operation by operation
        s = self._s
        offsets, starts, lengths, values = s._offsets, s._starts, s._lengths, s._values
        off_l, off_r = int(offsets[left]), int(offsets[right])
        k_min = max(off_l, t - (off_r + int(lengths[right]) - 1))
        k_max = min(off_l + int(lengths[left]) - 1, t - off_r)
        if k_max < k_min:
            return k_min, []
        if k_max == k_min:
            return k_min, [Fraction(1)]
        left_at = int(starts[left]) - off_l
        right_at = int(starts[right]) - off_r + t
        weights = [
            float(values[left_at + kk]) * float(values[right_at - kk])
            for kk in range(k_min, k_max + 1)
        ]
        mass = 0.0
        for w in weights:
            mass += w
        cumulative = []
        running = 0.0
        last_positive = 0
        for m, w in enumerate(weights):
            if w > 0.0:
                last_positive = m
            running += w
            cumulative.append(running)

        def below(threshold: float) -> int:
            """#{u in [0, 2^53): fl(fl(u 2^-53) * mass) < threshold} (monotone in u)."""
            low, high = 0, _TWO53  # answer in [low, high]
            while low < high:
                mid = (low + high) // 2
                if (mid * 2.0**-53) * mass < threshold:
                    low = mid + 1
                else:
                    high = mid
            return low

        counts = [0] * len(weights)
        previous = 0  # below(0.0): the target is never negative
        for m, c in enumerate(cumulative):
            now = below(c)
            counts[m] = now - previous  # u with cumulative[m-1] <= target < cumulative[m]
            previous = now
        counts[last_positive] += _TWO53 - previous  # target >= every cumulative sum
        return k_min, [Fraction(c, _TWO53) for c in counts]


def ideal_pmf(y, cal: Calibration, *, exact: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """The support and q(z | y) in exact rational arithmetic (see the module docstring).

    Exact for the calibration's doubles a, b, population taken at their exact values; so
    an exact reference for :func:`implemented_pmf`, unlike the float
    :func:`~dpcounts.sampling.enumeration.exact_pmf`.
    """
    support = _support(cal)
    shape = [Fraction(int(v)) for v in np.asarray(cal.clamp(np.asarray(y)))]
    shape = [s + Fraction(float(a)) for s, a in zip(shape, cal.a, strict=True)]
    if not family(cal.mechanism).uses_prior:  # md: one success probability
        success = [Fraction(1)] * cal.n_cells
    else:
        success = [
            Fraction(float(n)) / (Fraction(float(b)) + 2 * Fraction(float(n)))
            for n, b in zip(cal.population, cal.b, strict=True)
        ]
    top = int(support.max()) if support.size else 0
    tables = []
    for s, p in zip(shape, success, strict=True):
        table = [Fraction(1)]
        for z in range(1, top + 1):
            table.append(table[-1] * (s + z - 1) / z * p)
        tables.append(table)
    weights = [
        math.prod((tables[k][int(v)] for k, v in enumerate(z)), start=Fraction(1)) for z in support
    ]
    total = sum(weights, Fraction(0))
    return support, _as_output([w / total for w in weights], exact)


@functools.lru_cache(maxsize=64)
def _exp_lower(epsilon: float) -> Fraction:
    """A lower bound on e^epsilon (epsilon >= 0), a multiple of 2^-160 within 2^-150 of it:
    a partial sum of the series (every term is positive), rounded down."""
    x = Fraction(epsilon)
    term, total, n = Fraction(1), Fraction(1), 0
    while term > Fraction(1, 2**160):
        n += 1
        term = term * x / n
        total += term
    return Fraction(math.floor(total * 2**160), 2**160)


def _round_up(value: Fraction) -> float:
    out = float(value)
    if Fraction(out) < value:
        out = math.nextafter(out, math.inf)
    return out


def hockey_stick(p, q, epsilon: float) -> float:
    """sum_z max(0, p(z) - e^epsilon q(z)), exactly, rounded up to a double.

    ``p`` and ``q`` are probabilities over the same support (floats or Fractions, taken
    at their exact values). e^epsilon is replaced by a rational lower bound, so the result
    is an upper bound on the exact hockey-stick divergence: the smallest delta with
    P(S) <= e^epsilon Q(S) + delta for every set S.
    """
    if len(p) != len(q):
        raise ValueError(f"p and q must have the same length, got {len(p)} and {len(q)}")
    if not (np.isfinite(epsilon) and epsilon >= 0):
        raise ValueError(f"epsilon must be finite and >= 0, got {epsilon!r}")
    factor = _exp_lower(float(epsilon)) if epsilon > 0 else Fraction(1)
    factor_float = float(factor)
    total = Fraction(0)
    for a, b in zip(p, q, strict=True):
        a_float, b_float = float(a), float(b)
        # a term is 0 when a <= factor * b; decided in double when both sides are normal
        # numbers apart by far more than their rounding (relative 2^-52 each)
        if a_float == 0.0 and a == 0:
            continue
        if a_float > 1e-290 and b_float > 1e-290 and a_float < factor_float * b_float * 0.999:
            continue
        excess = Fraction(a) - factor * Fraction(b)
        if excess > 0:
            total += excess
    return _round_up(total)


def total_variation(p, q) -> float:
    """sum_z |p(z) - q(z)| / 2, exactly, rounded up to a double."""
    if len(p) != len(q):
        raise ValueError(f"p and q must have the same length, got {len(p)} and {len(q)}")
    total = sum((abs(Fraction(a) - Fraction(b)) for a, b in zip(p, q, strict=True)), Fraction(0))
    return _round_up(total / 2)
