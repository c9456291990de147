"""Compiled top-down draws from the convolution tree of both samplers
(:class:`~dpcounts.sampling.conditioned.ConditionedSampler`).

A draw fixes the root at y. and walks down the tree, splitting each node's value t
between its children with probability proportional to left(k) * right(t - k) (both
children's pmfs are stored normalised, so the products are the exact conditional
weights up to one constant per split). Each split is a short loop over k, and most nodes
near the leaves carry t = their minimum and need no random number at all, so a compiled
loop per node is far cheaper than vectorised NumPy, which must touch every node of every
level for every draw several times over.

Compiled with numba (cached on disk where numba can write, see
:mod:`dpcounts.compile_cache`: later processes load the machine code instead of compiling
again). The generator is passed in and advanced in
place, so the stream is that of the caller's ``rng``.

:func:`draw_tree` is the study sampler's draw (a 53-bit inverse CDF per split). The second
half of the module serves the release sampler (:mod:`dpcounts.sampling.release_mode`):
double-double arithmetic, the leaf recurrences and direct convolutions that build its
tree, and :func:`draw_tree_exact`, whose splits (:func:`exact_choice`) choose k with
probability exactly w_k / sum w, using only 53-bit integers taken from
``Generator.random()`` (or from a fixed array, for tests).
"""

from __future__ import annotations

import math

import llvmlite.ir
import numba
import numba.extending
import numpy as np

from dpcounts import compile_cache

#: Cache the machine code on disk when numba can write it somewhere (dpcounts.compile_cache).
CACHE = compile_cache.available(__file__)


@numba.njit(cache=CACHE)
def split_range(left, right, t, offsets, lengths):
    """(k_min, k_max): the values the ``left`` child can take when its parent holds ``t``,
    both children within their pmfs' supports (node ``v``'s pmf runs over ``offsets[v]`` to
    ``offsets[v] + lengths[v] - 1``); empty when k_max < k_min."""
    off_l = offsets[left]
    off_r = offsets[right]
    return max(off_l, t - (off_r + lengths[right] - 1)), min(off_l + lengths[left] - 1, t - off_r)


@numba.njit(cache=CACHE)
def draw_tree(
    n_draws: int,
    total: int,
    root: int,
    parents: np.ndarray,
    lefts: np.ndarray,
    rights: np.ndarray,
    offsets: np.ndarray,
    starts: np.ndarray,
    lengths: np.ndarray,
    values: np.ndarray,
    n_cells: int,
    rng: np.random.Generator,
) -> np.ndarray:
    """``n_draws`` vectors of leaf values (int64, shape (n_draws, n_cells)).

    ``parents[j], lefts[j], rights[j]`` list the internal nodes top-down (a parent before
    its children); ``rights[j] < 0`` marks a node carried up unchanged (its left child is
    itself). Node ``v`` has pmf ``values[starts[v] : starts[v] + lengths[v]]`` over the
    integers from ``offsets[v]``; leaves are nodes ``0 .. n_cells - 1``.
    """
    out = np.empty((n_draws, n_cells), dtype=np.int64)
    node_value = np.empty(offsets.size, dtype=np.int64)
    weights = np.empty(lengths.max(), dtype=np.float64)
    for d in range(n_draws):
        node_value[root] = total
        for j in range(parents.size):
            t = node_value[parents[j]]
            left = lefts[j]
            right = rights[j]
            if right < 0:
                node_value[left] = t
                continue
            k_min, k_max = split_range(left, right, t, offsets, lengths)
            k = k_min
            if k_max > k_min:
                width = k_max - k_min + 1
                left_at = starts[left] - offsets[left]
                right_at = starts[right] - offsets[right] + t
                mass = 0.0
                for m in range(width):
                    kk = k_min + m
                    w = values[left_at + kk] * values[right_at - kk]
                    weights[m] = w
                    mass += w
                target = rng.random() * mass
                cumulative = 0.0
                chosen = -1
                last_positive = 0
                for m in range(width):
                    if weights[m] > 0.0:
                        last_positive = m
                    cumulative += weights[m]
                    if cumulative > target:
                        chosen = m
                        break
                if chosen < 0:  # round-off left target at the top: the last possible k
                    chosen = last_positive
                k = k_min + chosen
            node_value[left] = k
            node_value[right] = t - k
        for c in range(n_cells):
            out[d, c] = node_value[c]
    return out


# =========================================================================================
# Release mode: double-double weights and exact splits
# =========================================================================================
#
# Everything below serves the release sampler (``ReleaseSampler``); the proofs are in the
# docstring of :mod:`dpcounts.sampling.release_mode`. A double-double (dd) is a pair of doubles
# (hi, lo) standing for the exact real hi + lo, normalised: hi = fl(hi + lo), so
# |lo| <= ulp(hi) / 2 <= u |hi| with u = 2^-53. On non-negative normalised operands, away
# from underflow and overflow, the operations below have relative error at most
# ``DD_OP_ERROR`` = 16 u^2 (worked out in the release_mode module: mul 8 u^2, add 3 u^2,
# div 13 u^2, each + O(u^3); the functions' docstrings round these up).

#: u = 2^-53, the unit round-off of a double.
UNIT_ROUNDOFF = 2.0**-53
#: Relative error of one double-double operation (multiply, add, divide) on the
#: non-negative, normalised, normal-range operands this module uses.
DD_OP_ERROR = 16.0 * UNIT_ROUNDOFF**2
#: Dd operations counted per step of a leaf's ratio recurrence: z + s, * rho, rho's own
#: error, / (z + 1), * previous entry, and one for the power-of-two rescalings (exact unless
#: a lo part drops below the normal range, an error below 2^-600 relative).
LEAF_OPS_PER_STEP = 6
#: Stored entries below 2^-FLOOR_BITS times their node's largest entry are set to zero (and
#: their mass counted as cut), so every product formed later stays in the normal range.
FLOOR_BITS = 400
#: A leaf's walk stops early once its entries and the geometric bound on everything beyond
#: are below 2^-STOP_BITS times its largest entry (:func:`walk_stop_bits`).
STOP_BITS = 440
#: ... or, when the leaf's tails of relative mass ``cutoff`` > 0 are cut, below
#: 2^-CUTOFF_MARGIN_BITS times that cutoff: everything beyond is cut anyway (issue #36).
CUTOFF_MARGIN_BITS = 64

_TWO53 = 9007199254740992.0
_TWO53_INT = 1 << 53
_MASK53 = (1 << 53) - 1


@numba.njit(cache=CACHE, inline="always")
def _two_sum(a, b):
    """s + e == a + b exactly (Knuth)."""
    s = a + b
    bb = s - a
    e = (a - (s - bb)) + (b - bb)
    return s, e


@numba.njit(cache=CACHE, inline="always")
def _fast_two_sum(a, b):
    """s + e == a + b exactly when |a| >= |b| (Dekker)."""
    s = a + b
    e = b - (s - a)
    return s, e


@numba.extending.intrinsic
def _fma(typingctx, a, b, c):
    """a * b + c rounded once (LLVM's fma: the FMA instruction where the CPU has one,
    otherwise the C library's fma, which is correctly rounded too)."""
    signature = numba.types.float64(numba.types.float64, numba.types.float64, numba.types.float64)

    def codegen(context, builder, sig, args):
        double = llvmlite.ir.DoubleType()
        kind = llvmlite.ir.FunctionType(double, [double, double, double])
        return builder.call(builder.module.declare_intrinsic("llvm.fma", [double], kind), args)

    return signature, codegen


@numba.njit(cache=CACHE, inline="always")
def _two_prod(a, b):
    """p + e == a * b exactly: e = fma(a, b, -p) is the product's exact rounding error
    (away from underflow; the same pair as Dekker's splitting gives, in three operations)."""
    p = a * b
    return p, _fma(a, b, -p)


@numba.njit(cache=CACHE, inline="always")
def dd_mul(ah, al, bh, bl):
    """(ah + al) * (bh + bl) as a normalised dd, relative error <= 9 u^2."""
    p, e = _two_prod(ah, bh)
    e += ah * bl + al * bh
    return _fast_two_sum(p, e)


@numba.njit(cache=CACHE, inline="always")
def dd_add(ah, al, bh, bl):
    """(ah + al) + (bh + bl) for non-negative operands, relative error <= 4 u^2."""
    s, e = _two_sum(ah, bh)
    e += al + bl
    return _fast_two_sum(s, e)


@numba.njit(cache=CACHE, inline="always")
def dd_div(ah, al, bh, bl):
    """(ah + al) / (bh + bl) for positive operands, relative error <= 14 u^2."""
    q1 = ah / bh
    p, e = _two_prod(q1, bh)
    r = (((ah - p) - e) + al) - q1 * bl
    q2 = r / bh
    return _fast_two_sum(q1, q2)


# --- exact random choices from 53-bit integers ----------------------------------------------


def next_u53(source):
    """One uniform integer in [0, 2^53) from ``source``.

    This Python body is numba's overload stub, not missing work: the implementations for a
    ``numpy.random.Generator`` and for a test stream are in the ``@overload`` below, and
    numba uses them in compiled callers (``uniform_below``, ``exact_choice``). Called from
    plain Python it refuses.
    """
    raise TypeError("next_u53 is callable from numba-compiled code only (see its overload)")


@numba.extending.overload(next_u53, jit_options={"cache": CACHE})
def _next_u53_overload(source):
    if isinstance(source, numba.types.NumPyRandomGeneratorType):
        # Generator.random() is (next_uint64 >> 11) * 2^-53 for numpy's bit generators and
        # randomgen's (ChaCha included), so this product is an exact uniform 53-bit integer.
        def from_generator(source):
            scaled = source.random() * _TWO53
            u = np.int64(scaled)
            if u != scaled:  # a bit generator whose doubles are not k / 2^53
                raise ValueError("the generator's random() is not a multiple of 2^-53")
            return u

        return from_generator
    if isinstance(source, numba.types.Array) and isinstance(source.dtype, numba.types.Integer):
        # a deterministic stream for tests: source[0] counts the integers used so far and
        # source[1:] holds them
        def from_stream(source):
            used = source[0]
            if used + 1 >= source.size:
                raise ValueError("the stream of 53-bit integers is exhausted")
            source[0] = used + 1
            return np.int64(source[used + 1])

        return from_stream
    return None


@numba.njit(cache=CACHE)
def uniform_below(n, source):
    """A uniform integer in [0, n), 1 <= n <= 2^53, exactly: rejection from 53-bit integers."""
    limit = _TWO53_INT - _TWO53_INT % n
    while True:
        u = next_u53(source)
        if u < limit:
            return u % n


@numba.njit(cache=CACHE, inline="always")
def _window_bits(value, position, window):
    """Bits of ``value * 2^position`` (0 <= value < 2^53) at positions window..window+52."""
    shift = position - window
    if shift >= 53 or shift <= -53:
        return np.int64(0)
    if shift >= 0:
        return (value & ((np.int64(1) << (53 - shift)) - 1)) << shift
    return value >> (-shift)


@numba.njit(cache=CACHE, inline="always")
def _trailing_zeros(value):
    count = 0
    while value & 1 == 0:
        value >>= 1
        count += 1
    return count


@numba.njit(cache=CACHE)
def bernoulli_dd(hi, lo, exponent, source):
    """True with probability exactly (hi + lo) / 2^exponent, for a normalised dd with
    0 < hi + lo < 2^exponent (``hi < 2^exponent`` suffices).

    Lazy comparison U < x of x = (hi + lo) 2^-exponent with U = sum_j u_j 2^(-53 j), the u_j
    being fresh 53-bit integers: x's base-2^53 digits are formed exactly from the integer
    mantissas of hi and lo, and the first digit where u_j differs decides. x is dyadic, so
    once its remaining digits are zero and U has matched them, U >= x.

    x is written as disjoint bit segments: hi's mantissa M_h at position a (and lo's
    mantissa M_l below it when lo > 0); when lo < 0, x = (M_h - 1) 2^a + (2^a - |lo|
    2^-exponent), the second part being a run of ones above 2^53 - M_l (positions b..).
    """
    if hi <= 0.0:
        return False
    frac_h, exp_h = math.frexp(hi)
    mant_h = np.int64(frac_h * _TWO53)
    pos_a = exp_h - 53 - exponent  # x's bits from hi: mant_h at positions pos_a..pos_a+52
    seg1 = mant_h
    seg2 = np.int64(0)
    pos_b = np.int64(0)
    run_lo = np.int64(1)  # run of ones at positions run_lo..run_hi (empty when lo > hi)
    run_hi = np.int64(0)
    if lo != 0.0:
        frac_l, exp_l = math.frexp(abs(lo))
        mant_l = np.int64(frac_l * _TWO53)
        pos_b = exp_l - 53 - exponent
        if lo > 0.0:
            seg2 = mant_l
        else:
            seg1 = mant_h - 1
            seg2 = _TWO53_INT - mant_l  # in (0, 2^52]; 2^(pos_a - pos_b) - mant_l below a
            run_lo = pos_b + 53
            run_hi = pos_a - 1
    lowest = pos_a + _trailing_zeros(seg1) if seg1 > 0 else np.int64(1 << 40)
    if seg2 > 0:
        lowest = min(lowest, pos_b + _trailing_zeros(seg2))
    if run_lo <= run_hi:
        lowest = min(lowest, run_lo)
    j = 1
    while True:
        window = -53 * j
        digit = _window_bits(seg1, pos_a, window)
        if seg2 > 0:
            digit |= _window_bits(seg2, pos_b, window)
        if run_lo <= run_hi:
            bottom = max(run_lo, window)
            top = min(run_hi, window + 52)
            if bottom <= top:
                digit |= ((np.int64(1) << (top - bottom + 1)) - 1) << (bottom - window)
        u = next_u53(source)
        if u < digit:
            return True
        if u > digit:
            return False
        if lowest >= window:  # x has no bits below this digit: U >= x
            return False
        j += 1


@numba.njit(cache=CACHE)
def exact_choice(weight_hi, weight_lo, n, source):
    """An index k in [0, n) with probability exactly w_k / sum_m w_m, w_k = hi_k + lo_k >= 0.

    Uniform proposal (exact, by rejection) accepted with probability w_k / 2^E, where 2^E
    exceeds every w_k: the accepted index has probability proportional to w_k. No random
    number is used when a single weight is positive.
    """
    largest = 0.0
    positive = 0
    last = -1
    for k in range(n):
        if weight_hi[k] > 0.0:
            positive += 1
            last = k
            if weight_hi[k] > largest:
                largest = weight_hi[k]
    if positive == 0:
        raise ValueError("exact_choice: no positive weight")
    if positive == 1:
        return last
    exponent = math.frexp(largest)[1]  # largest < 2^exponent, hence every hi + lo < 2^exponent
    while True:
        k = uniform_below(n, source)
        if weight_hi[k] > 0.0 and bernoulli_dd(weight_hi[k], weight_lo[k], exponent, source):
            return k


@numba.njit(cache=CACHE)
def split_weights(left, right, t, offsets, starts, lengths, values_hi, values_lo, out_hi, out_lo):
    """The weights w_k = left(k) * right(t - k) (dd products) of splitting value t of a node
    between its children; fills ``out_*[:width]`` and returns (k_min, width)."""
    k_min, k_max = split_range(left, right, t, offsets, lengths)
    width = k_max - k_min + 1
    left_at = starts[left] - offsets[left]
    right_at = starts[right] - offsets[right] + t
    for m in range(max(width, 0)):
        kk = k_min + m
        out_hi[m], out_lo[m] = dd_mul(
            values_hi[left_at + kk],
            values_lo[left_at + kk],
            values_hi[right_at - kk],
            values_lo[right_at - kk],
        )
    return k_min, width


@numba.njit(cache=CACHE)
def draw_splits_exact(j0, j1, node_value, parents, lefts, rights, offsets, starts, lengths,
                      values_hi, values_lo, w_hi, w_lo, source):  # fmt: skip
    """Splits ``j0 .. j1 - 1`` of :func:`draw_tree_exact`'s walk, in order, for one draw:
    ``node_value`` holds the parents' values and receives the children's (the buffers
    ``w_*`` hold at least ``lengths.max() + 1`` entries)."""
    for j in range(j0, j1):
        t = node_value[parents[j]]
        left = lefts[j]
        right = rights[j]
        if right < 0:
            node_value[left] = t
            continue
        k_min, width = split_weights(
            left, right, t, offsets, starts, lengths, values_hi, values_lo, w_hi, w_lo
        )
        k = k_min + exact_choice(w_hi, w_lo, width, source)
        node_value[left] = k
        node_value[right] = t - k


@numba.njit(cache=CACHE)
def draw_tree_exact(
    n_draws,
    total,
    root,
    parents,
    lefts,
    rights,
    offsets,
    starts,
    lengths,
    values_hi,
    values_lo,
    n_cells,
    source,
):
    """Like :func:`draw_tree`, with dd node pmfs and every split drawn by
    :func:`exact_choice`: P(k) = w_k / sum_m w_m exactly, w from :func:`split_weights`."""
    out = np.empty((n_draws, n_cells), dtype=np.int64)
    node_value = np.empty(offsets.size, dtype=np.int64)
    w_hi = np.empty(lengths.max() + 1, dtype=np.float64)
    w_lo = np.empty(lengths.max() + 1, dtype=np.float64)
    for d in range(n_draws):
        node_value[root] = total
        draw_splits_exact(0, parents.size, node_value, parents, lefts, rights, offsets, starts,
                          lengths, values_hi, values_lo, w_hi, w_lo, source)  # fmt: skip
        for c in range(n_cells):
            out[d, c] = node_value[c]
    return out


# --- release-mode construction ---------------------------------------------------------------


@numba.njit(cache=CACHE)
def walk_stop_bits(cutoff):
    """Bits below its largest entry at which a leaf's walk may stop (:func:`leaf_walk`):
    :data:`STOP_BITS`, beyond the floor every entry below which is zeroed, when no tail
    is cut (``cutoff`` 0); else :data:`CUTOFF_MARGIN_BITS` below the ``cutoff`` whose cut
    (:func:`trim_dd`) drops the entries there anyway. What the walk stops short of is then
    below 2^-64 of the mass the cut removes: it cannot move the cut but where the cut's
    running sum lies within that of its threshold (its own rounding is 2^-53), so the
    kept entries are those of a walk to 2^-440; the unwalked rest is counted as cut, twice
    its bound (module docstring of :mod:`dpcounts.sampling.release_mode`, step 4)."""
    if cutoff <= 0.0:
        return float(STOP_BITS)
    return float(min(STOP_BITS, math.ceil(-math.log2(cutoff)) + CUTOFF_MARGIN_BITS))


@numba.njit(cache=CACHE)
def leaf_walk(lo, hi, s_hi, s_lo, rho_hi, rho_lo, out_hi, out_lo, out_exp, stop):
    """Unnormalised pmf f(z) = prod_{j=lo}^{z-1} r(j), r(j) = (j + s) rho / (j + 1), from f(lo) = 1.

    Entries are dds times 2^out_exp (renormalised as they go, so nothing under- or
    overflows). The walk covers lo..hi, or stops early at z once f(z) and the bound
    f(z) R / (1 - R) on everything beyond are below 2^-``stop`` max f
    (:func:`walk_stop_bits`), with R = max(r(z), rho) >= sup_{z' >= z} r(z') (r is
    monotone in z with limit rho). Returns (entries walked, log2 of that remainder bound
    relative to max f, or -inf).
    """
    value_hi = 1.0
    value_lo = 0.0
    value_exp = np.int64(0)
    best = 0.0  # log2 of the largest entry so far
    rho_up = rho_hi * (1.0 + 2.0**-50)
    n = hi - lo + 1
    for i in range(n):
        z = lo + i
        out_hi[i] = value_hi
        out_lo[i] = value_lo
        out_exp[i] = value_exp
        level = math.log2(value_hi) + value_exp
        if level > best:
            best = level
        if i == n - 1:
            break
        zs_hi, zs_lo = dd_add(s_hi, s_lo, float(z), 0.0)
        r_hi, r_lo = dd_mul(zs_hi, zs_lo, rho_hi, rho_lo)
        r_hi, r_lo = dd_div(r_hi, r_lo, float(z + 1), 0.0)
        bound = max(r_hi * (1.0 + 2.0**-50), rho_up)
        if bound < 1.0 and level - best < -stop:
            remainder = level - best + math.log2(bound / (1.0 - bound))
            if remainder < -stop:
                return i + 1, remainder
        value_hi, value_lo = dd_mul(value_hi, value_lo, r_hi, r_lo)
        if value_hi > 2.0**200 or value_hi < 2.0**-200:
            shift = math.frexp(value_hi)[1]
            value_hi = math.ldexp(value_hi, -shift)
            value_lo = math.ldexp(value_lo, -shift)
            value_exp += shift
    return n, -np.inf


@numba.njit(cache=CACHE)
def convolve_dd(a_hi, a_lo, b_hi, b_lo, length, out_hi, out_lo):
    """out[s] = sum_m a[m] b[s - m] for s < length, in dd (products then sequential
    non-negative additions; zero entries skipped)."""
    na = a_hi.size
    nb = b_hi.size
    for s in range(length):
        acc_hi = 0.0
        acc_lo = 0.0
        for m in range(max(0, s - nb + 1), min(na, s + 1)):
            if a_hi[m] == 0.0 or b_hi[s - m] == 0.0:
                continue
            p_hi, p_lo = dd_mul(a_hi[m], a_lo[m], b_hi[s - m], b_lo[s - m])
            acc_hi, acc_lo = dd_add(acc_hi, acc_lo, p_hi, p_lo)
        out_hi[s] = acc_hi
        out_lo[s] = acc_lo


@numba.njit(cache=CACHE)
def dot_dd(a_hi, a_lo, b_hi, b_lo, t):
    """sum_m a[m] b[t - m] in dd: one entry of the convolution."""
    acc_hi = 0.0
    acc_lo = 0.0
    for m in range(max(0, t - b_hi.size + 1), min(a_hi.size, t + 1)):
        if a_hi[m] == 0.0 or b_hi[t - m] == 0.0:
            continue
        p_hi, p_lo = dd_mul(a_hi[m], a_lo[m], b_hi[t - m], b_lo[t - m])
        acc_hi, acc_lo = dd_add(acc_hi, acc_lo, p_hi, p_lo)
    return acc_hi, acc_lo


@numba.njit(cache=CACHE)
def trim_dd(values_hi, values_lo, values_exp, n, cutoff, trim):
    """Cut a node's tails of mass <= ``cutoff`` (if ``trim``) and every entry below
    2^-FLOOR_BITS times its largest; rescale by a power of two so the largest is in [1/2, 1).

    The entries are (hi + lo) 2^exp for i < n. Returns (first, last, log of the cut mass,
    log of the total mass, log of the rescaling factor); masses are in the entries' own
    units, computed in double from the hi parts (enough for the bound, see the module
    docstring of :mod:`dpcounts.sampling.release_mode`). Entries first..last are rewritten in
    place, rescaled, the floored ones set to zero.
    """
    best = -np.inf
    # each positive entry's log2 (its level), computed once (the same doubles as computing
    # it in every loop below, as before issue #36)
    levels = np.empty(n)
    for i in range(n):
        if values_hi[i] > 0.0:
            level = math.log2(values_hi[i]) + values_exp[i]
            levels[i] = level
            if level > best:
                best = level
    if best == -np.inf:
        raise RuntimeError("a node's pmf has no positive entry")
    mass = np.zeros(n)  # relative to the largest; entries too small for a double count 2^-1000
    for i in range(n):
        if values_hi[i] > 0.0:
            mass[i] = 2.0 ** max(levels[i] - best, -1000.0)
    total = 0.0
    for i in range(n):
        total += mass[i]
    first = 0
    last = n - 1
    if trim:
        cumulative = 0.0
        while first < n - 1 and cumulative + mass[first] <= cutoff * total:
            cumulative += mass[first]
            first += 1
        cumulative = 0.0
        while last > first and cumulative + mass[last] <= cutoff * total:
            cumulative += mass[last]
            last -= 1
    cut = 0.0
    for i in range(n):
        if i < first or i > last:
            cut += mass[i]
    # the rescaling: the largest entry's own exponent, so it lands in [1/2, 1)
    top = np.int64(0)
    top_level = -np.inf
    for i in range(first, last + 1):
        if values_hi[i] > 0.0:
            level = levels[i]
            if level > top_level:
                top_level = level
                top = values_exp[i] + math.frexp(values_hi[i])[1]
    for i in range(first, last + 1):
        if values_hi[i] > 0.0 and levels[i] - best < -FLOOR_BITS:
            cut += mass[i]
            values_hi[i] = 0.0
            values_lo[i] = 0.0
        else:
            values_hi[i] = math.ldexp(values_hi[i], values_exp[i] - top)
            values_lo[i] = math.ldexp(values_lo[i], values_exp[i] - top)
    log_cut = math.log(cut) + best * math.log(2.0) if cut > 0.0 else -np.inf
    log_total = math.log(total) + best * math.log(2.0)
    return first, last, log_cut, log_total, top * math.log(2.0), best


@numba.njit(cache=CACHE)
def tilted_success(population, b, tilt, md, out_hi, out_lo):
    """rho_k = p_k * tilt as dds, p_k = n_k / (b_k + 2 n_k) (pg, truncated) or 1 (md).

    n * tilt and b + 2 n are exact dds (the exact two-product, Knuth's sum); one dd division.
    """
    for k in range(out_hi.size):
        if md:
            out_hi[k] = tilt
            out_lo[k] = 0.0
            continue
        num_hi, num_lo = _two_prod(population[k], tilt)
        den_hi, den_lo = _two_sum(b[k], 2.0 * population[k])
        out_hi[k], out_lo[k] = dd_div(num_hi, num_lo, den_hi, den_lo)
