"""Compiled, parallel construction of the tree of the release sampler
(:class:`~dpcounts.sampling.release_mode.ReleaseSampler`).

Its tree (module docstring of :mod:`dpcounts.sampling.release_mode`) is built here in two
compiled phases that run on every core numba is given:

* :func:`build_leaves`: every cell's leaf (its exact-ratio walk, :func:`~dpcounts.sampling.
  tree_draw.leaf_walk`, then :func:`~dpcounts.sampling.tree_draw.trim_dd`), cells split into
  blocks, one scratch buffer per block. A first pass finds each leaf's kept length and keeps
  the entries of the short leaves (at most :data:`KEPT`, most of a national table's); a
  second stores every leaf where it belongs, walking again only the longer ones (storing
  every walked entry of an untruncated leaf, which walks up to y. + 1 values, would cost far
  more memory than walking twice costs time).
* :func:`convolve_level`: one level of internal nodes, each the direct dd convolution of
  its two children. The work is split into chunks of output entries (so one wide node near
  the root keeps every core busy) and each chunk runs over the left child's entries in the
  outer loop and the output entries in the inner one: the inner loop has no dependency
  between iterations, so it runs in SIMD lanes, while each output entry still adds its
  products in the order of the left child's index, exactly as a sequential convolution
  does. The stored values are therefore bit for bit those of a sequential loop, and the
  operation count of the bound (m_v + 2 per entry, the docstring's step 2) is unchanged.

Nothing here changes what is stored or what the bound counts; it changes only how fast and
on how many cores it is computed. ``tests/test_release_sampler.py`` checks the stored tree
against a sequential reference.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numba
import numpy as np

from dpcounts import compile_cache
from dpcounts.sampling.tree_draw import dd_add, dd_mul, leaf_walk, trim_dd, walk_stop_bits

CACHE = compile_cache.available(__file__)

#: Output entries per work item of :func:`convolve_level`.
CHUNK = 2048
#: Entries of a leaf that :func:`build_leaves`' first pass keeps, so that its second pass
#: copies them instead of walking again (most leaves of a national table are shorter).
KEPT = 24


@numba.njit(cache=CACHE)
def _leaf_block(block, n_blocks, lo_w, hi_w, s_hi, s_lo, rho_hi, rho_lo, cutoff, results, store,
                starts, lengths, values_hi, values_lo, kept_hi, kept_lo):  # fmt: skip
    """Walk and trim the leaves of one block of cells: record their results and keep the
    entries of a leaf of at most :data:`KEPT` of them in row k of ``kept`` (first pass),
    or copy every leaf's kept entries to ``values`` at ``starts`` (second pass,
    ``store``), walking again only the leaves longer than that."""
    n = lo_w.size
    begin = block * n // n_blocks
    end = (block + 1) * n // n_blocks
    size = 1
    for k in range(begin, end):
        size = max(size, hi_w[k] - lo_w[k] + 1)
    buf_hi = np.empty(size)
    buf_lo = np.empty(size)
    buf_exp = np.zeros(size, np.int64)
    stop = walk_stop_bits(cutoff)
    for k in range(begin, end):
        if store and lengths[k] <= KEPT:  # kept by the first pass: no second walk
            for i in range(lengths[k]):
                values_hi[starts[k] + i] = kept_hi[k, i]
                values_lo[starts[k] + i] = kept_lo[k, i]
            continue
        walked, rest = leaf_walk(
            lo_w[k],
            hi_w[k],
            s_hi[k],
            s_lo[k],
            rho_hi[k],
            rho_lo[k],
            buf_hi,
            buf_lo,
            buf_exp,
            stop,
        )
        first, last, log_cut, log_total, log_rescale, best = trim_dd(
            buf_hi, buf_lo, buf_exp, walked, cutoff, True
        )
        if store:
            for i in range(lengths[k]):
                values_hi[starts[k] + i] = buf_hi[first + i]
                values_lo[starts[k] + i] = buf_lo[first + i]
        else:
            if last - first + 1 <= KEPT:
                for i in range(last - first + 1):
                    kept_hi[k, i] = buf_hi[first + i]
                    kept_lo[k, i] = buf_lo[first + i]
            results[0, k] = first
            results[1, k] = last
            results[2, k] = walked
            results[3, k] = log_cut
            results[4, k] = log_total
            results[5, k] = log_rescale
            results[6, k] = best
            results[7, k] = rest


@numba.njit(cache=CACHE)
def _convolve_item(item, item_start, values_hi, values_lo, starts, lengths, lefts, rights,
                   out_starts, out_lengths, out_hi, out_lo):  # fmt: skip
    """One chunk of :func:`convolve_level`'s output entries."""
    p = np.searchsorted(item_start, item, side="right") - 1
    s0 = (item - item_start[p]) * CHUNK
    s1 = min(s0 + CHUNK, out_lengths[p])
    base = out_starts[p]
    for s in range(s0, s1):
        out_hi[base + s] = 0.0
        out_lo[base + s] = 0.0
    a0 = starts[lefts[p]]
    na = lengths[lefts[p]]
    b0 = starts[rights[p]]
    nb = lengths[rights[p]]
    for m in range(min(na, s1)):
        a_hi = values_hi[a0 + m]
        a_lo = values_lo[a0 + m]
        j0 = max(0, s0 - m)
        j1 = min(nb, s1 - m)
        if j1 <= j0:
            continue
        # contiguous views: the loop below then runs in SIMD lanes (index arithmetic on
        # the flat arrays keeps LLVM from vectorising it, 4-5 times slower)
        b_hi = values_hi[b0 + j0 : b0 + j1]
        b_lo = values_lo[b0 + j0 : b0 + j1]
        o_hi = out_hi[base + m + j0 : base + m + j1]
        o_lo = out_lo[base + m + j0 : base + m + j1]
        for j in range(j1 - j0):
            p_hi, p_lo = dd_mul(a_hi, a_lo, b_hi[j], b_lo[j])
            o_hi[j], o_lo[j] = dd_add(o_hi[j], o_lo[j], p_hi, p_lo)


@numba.njit(cache=CACHE)
def _items(out_lengths):
    """Cumulative count of :data:`CHUNK`-entry work items per pair."""
    item_start = np.zeros(out_lengths.size + 1, np.int64)
    for p in range(out_lengths.size):
        item_start[p + 1] = item_start[p] + (out_lengths[p] + CHUNK - 1) // CHUNK
    return item_start


@numba.njit(cache=CACHE, parallel=True)
def _leaves_parallel(n_blocks, lo_w, hi_w, s_hi, s_lo, rho_hi, rho_lo, cutoff, results, store,
                     starts, lengths, values_hi, values_lo, kept_hi, kept_lo):  # fmt: skip
    for block in numba.prange(n_blocks):
        _leaf_block(block, n_blocks, lo_w, hi_w, s_hi, s_lo, rho_hi, rho_lo, cutoff, results,
                    store, starts, lengths, values_hi, values_lo, kept_hi, kept_lo)  # fmt: skip


@numba.njit(cache=CACHE)
def _leaves_serial(n_blocks, lo_w, hi_w, s_hi, s_lo, rho_hi, rho_lo, cutoff, results, store,
                   starts, lengths, values_hi, values_lo, kept_hi, kept_lo):  # fmt: skip
    for block in range(n_blocks):
        _leaf_block(block, n_blocks, lo_w, hi_w, s_hi, s_lo, rho_hi, rho_lo, cutoff, results,
                    store, starts, lengths, values_hi, values_lo, kept_hi, kept_lo)  # fmt: skip


@numba.njit(cache=CACHE, parallel=True)
def _convolve_parallel(values_hi, values_lo, starts, lengths, lefts, rights, out_starts,
                       out_lengths, out_hi, out_lo):  # fmt: skip
    item_start = _items(out_lengths)
    for item in numba.prange(item_start[-1]):
        _convolve_item(item, item_start, values_hi, values_lo, starts, lengths, lefts, rights,
                       out_starts, out_lengths, out_hi, out_lo)  # fmt: skip


@numba.njit(cache=CACHE)
def _convolve_serial(values_hi, values_lo, starts, lengths, lefts, rights, out_starts,
                     out_lengths, out_hi, out_lo):  # fmt: skip
    item_start = _items(out_lengths)
    for item in range(item_start[-1]):
        _convolve_item(item, item_start, values_hi, values_lo, starts, lengths, lefts, rights,
                       out_starts, out_lengths, out_hi, out_lo)  # fmt: skip


@numba.njit(cache=CACHE)
def _trim_one(p, out_hi, out_lo, out_starts, out_lengths, cutoff, trim, zeros, results):
    a = out_starts[p]
    b = a + out_lengths[p]
    first, last, log_cut, _, log_rescale, _ = trim_dd(
        out_hi[a:b], out_lo[a:b], zeros, out_lengths[p], cutoff, trim
    )
    results[0, p] = first
    results[1, p] = last
    results[2, p] = log_cut
    results[3, p] = log_rescale


@numba.njit(cache=CACHE, parallel=True)
def _trim_parallel(out_hi, out_lo, out_starts, out_lengths, cutoff, trim, zeros, results):
    for p in numba.prange(out_starts.size):
        _trim_one(p, out_hi, out_lo, out_starts, out_lengths, cutoff, trim, zeros, results)


@numba.njit(cache=CACHE)
def _trim_serial(out_hi, out_lo, out_starts, out_lengths, cutoff, trim, zeros, results):
    for p in range(out_starts.size):
        _trim_one(p, out_hi, out_lo, out_starts, out_lengths, cutoff, trim, zeros, results)


@numba.njit(cache=CACHE, parallel=True)
def _gather_parallel(source_hi, source_lo, starts, lengths, out_hi, out_lo, out_starts):
    for p in numba.prange(starts.size):
        a, b, n = starts[p], out_starts[p], lengths[p]
        out_hi[b : b + n] = source_hi[a : a + n]
        out_lo[b : b + n] = source_lo[a : a + n]


@numba.njit(cache=CACHE)
def _gather_serial(source_hi, source_lo, starts, lengths, out_hi, out_lo, out_starts):
    for p in range(starts.size):
        a, b, n = starts[p], out_starts[p], lengths[p]
        out_hi[b : b + n] = source_hi[a : a + n]
        out_lo[b : b + n] = source_lo[a : a + n]


#: Cells per block of :func:`tilted_moments` (fixed: the sums' order, hence their bits,
#: does not depend on how many cores run them).
MOMENT_BLOCK = 4096
#: |log q| up to which a cell's weights are walked by their ratios; beyond it, by lgamma.
_RATIO_WALK = 300.0


@numba.njit(cache=CACHE)
def _cell_moments(lo, hi, shape, log_q):
    """Mean and variance of the cell law w(v) ~ Gamma(v + shape) / v! q^v on lo..hi.

    Where |log q| is moderate, w(v + 1) = w(v) (v + shape) q / (v + 1) is walked from
    w(lo) = 1, the running weight kept as a mantissa and a power of two (renormalised
    when it leaves [2^-300, 2^300]; the sums are kept at one power of two, a term far
    below it adds nothing): a few multiplications an entry. Beyond, each weight is
    computed by lgamma, in logs (the laws are then close to a point mass at an end)."""
    width = hi - lo + 1
    s0 = 0.0
    s1 = 0.0
    s2 = 0.0
    if abs(log_q) <= _RATIO_WALK:
        q = math.exp(log_q)
        w = 1.0
        e = 0  # the weight is w 2^e
        top = 0  # the sums are s 2^top
        for u in range(width):
            if e != top:
                if e > top:  # a larger weight: bring the sums to its scale
                    s0 = math.ldexp(s0, top - e)
                    s1 = math.ldexp(s1, top - e)
                    s2 = math.ldexp(s2, top - e)
                    top = e
                t = math.ldexp(w, e - top)
            else:
                t = w
            s0 += t
            s1 += u * t
            s2 += u * (u * t)
            v = lo + u
            w *= (v + shape) * q / (v + 1.0)
            if w > 2.0**300 or (0.0 < w < 2.0**-300):
                m, x = math.frexp(w)
                w = m
                e += x
    else:
        best = -np.inf
        for u in range(width):
            v = lo + u
            best = max(best, math.lgamma(v + shape) - math.lgamma(v + 1.0) + v * log_q)
        for u in range(width):
            v = lo + u
            t = math.exp(math.lgamma(v + shape) - math.lgamma(v + 1.0) + v * log_q - best)
            s0 += t
            s1 += u * t
            s2 += u * (u * t)
    mean = s1 / s0
    return lo + mean, max(s2 / s0 - mean * mean, 0.0)


@numba.njit(cache=CACHE)
def _moment_block(block, lo, hi, shape, log_p, log_c, partial):
    begin = block * MOMENT_BLOCK
    end = min(begin + MOMENT_BLOCK, lo.size)
    mean = 0.0
    var = 0.0
    for k in range(begin, end):
        m, s = _cell_moments(lo[k], hi[k], shape[k], log_p[k] + log_c)
        mean += m
        var += s
    partial[0, block] = mean
    partial[1, block] = var


@numba.njit(cache=CACHE, parallel=True)
def _moments_parallel(lo, hi, shape, log_p, log_c, partial):
    for block in numba.prange(partial.shape[1]):
        _moment_block(block, lo, hi, shape, log_p, log_c, partial)


@numba.njit(cache=CACHE)
def _moments_serial(lo, hi, shape, log_p, log_c, partial):
    for block in range(partial.shape[1]):
        _moment_block(block, lo, hi, shape, log_p, log_c, partial)


def tilted_moments(lo, hi, shape, log_p, parallel, log_c):
    """(sum of the means, sum of the variances) of the cells tilted by ``log_c``: cell k's
    law proportional to Gamma(v + shape_k) / v! (p_k c)^v on lo_k..hi_k (``log_p`` = log
    p_k). Streams the windows (memory per cell, not per window entry); blocks of
    :data:`MOMENT_BLOCK` cells on every core when ``parallel``, their sums added in block
    order, so the result does not depend on the number of cores."""
    partial = np.empty((2, max(1, -(-lo.size // MOMENT_BLOCK))))
    run = _moments_parallel if parallel else _moments_serial
    run(lo, hi, shape, log_p, float(log_c), partial)
    return math.fsum(partial[0]), math.fsum(partial[1])


def build_leaves(lo_w, hi_w, s_hi, s_lo, rho_hi, rho_lo, cutoff, parallel):
    """Every leaf of the release tree, walked and trimmed, stored one after another.

    Returns (values_hi, values_lo, lengths, first, n_walk, log_cut, log_total, log_rescale,
    best, remainder): the kept entries of cell k are ``values[start_k : start_k +
    lengths[k]]`` (starts the cumulative lengths), its window begins ``first[k]`` entries
    after ``lo_w[k]``; the rest are :func:`~dpcounts.sampling.tree_draw.leaf_walk`'s and
    :func:`~dpcounts.sampling.tree_draw.trim_dd`'s results for that cell. ``parallel``:
    on every core numba has, the cells in blocks (else in one thread).
    """
    n = lo_w.size
    n_blocks = max(1, min(numba.get_num_threads(), n // 64 + 1)) if parallel else 1
    run = _leaves_parallel if parallel else _leaves_serial
    results = np.empty((8, n))
    empty_i, empty_f = np.empty(0, np.int64), np.empty(0)
    # each leaf of at most KEPT entries is kept by the first pass (a fresh array takes
    # memory only as it is written: a row a leaf kept)
    kept_hi, kept_lo = np.empty((n, KEPT)), np.empty((n, KEPT))
    run(n_blocks, lo_w, hi_w, s_hi, s_lo, rho_hi, rho_lo, cutoff, results, False,
        empty_i, empty_i, empty_f, empty_f, kept_hi, kept_lo)  # fmt: skip
    first, last, n_walk = (results[i].astype(np.int64) for i in range(3))
    lengths = last - first + 1
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
    values_hi, values_lo = np.empty(int(lengths.sum())), np.empty(int(lengths.sum()))
    run(n_blocks, lo_w, hi_w, s_hi, s_lo, rho_hi, rho_lo, cutoff, results, True,
        starts, lengths, values_hi, values_lo, kept_hi, kept_lo)  # fmt: skip
    del kept_hi, kept_lo
    log_cut, log_total, log_rescale, best, remainder = results[3:]
    return (
        values_hi, values_lo, lengths, first, n_walk, log_cut, log_total, log_rescale, best,
        remainder,
    )  # fmt: skip


def convolve_level(
    values_hi, values_lo, starts, lengths, lefts, rights, out_starts, out_lengths, out_hi, out_lo,
    parallel=True,
):  # fmt: skip
    """Write the convolution of nodes ``lefts[p]`` and ``rights[p]`` (their first
    ``out_lengths[p]`` entries) at ``out_starts[p]`` in ``out_hi``/``out_lo``, for every p.

    Each output entry s is the sum over m, in increasing m, of the dd products
    left[m] * right[s - m] (a zero product adds exactly nothing), as
    :func:`~dpcounts.sampling.tree_draw.convolve_dd` computes it; chunks of :data:`CHUNK`
    output entries run on every core when ``parallel``.
    """
    run = _convolve_parallel if parallel else _convolve_serial
    run(values_hi, values_lo, starts, lengths, lefts, rights, out_starts, out_lengths,
        out_hi, out_lo)  # fmt: skip


def trim_level(out_hi, out_lo, out_starts, out_lengths, cutoff, trim, parallel=True):
    """:func:`~dpcounts.sampling.tree_draw.trim_dd` of every node written by
    :func:`convolve_level`, in place. Returns (first, last, log_cut, log_rescale)."""
    results = np.empty((4, out_starts.size))
    zeros = np.zeros(max(1, int(out_lengths.max())), np.int64)
    run = _trim_parallel if parallel else _trim_serial
    run(out_hi, out_lo, out_starts, out_lengths, cutoff, trim, zeros, results)
    return results[0].astype(np.int64), results[1].astype(np.int64), results[2], results[3]


def gather(source_hi, source_lo, starts, lengths, out_hi, out_lo, out_starts, parallel=True):
    """Copy ``source[starts[p] : starts[p] + lengths[p]]`` to ``out[out_starts[p]:]``."""
    run = _gather_parallel if parallel else _gather_serial
    run(source_hi, source_lo, starts, lengths, out_hi, out_lo, out_starts)


class MachineRate(NamedTuple):
    """Multiply-adds a second that :func:`convolve_level` does on this machine: on every
    core numba has (``parallel``, the rate of a release's compiled build) and on one
    (``serial``, the rate of its one-threaded work: reading, checking, drawing and
    writing). On a quiet 2-core machine ``parallel`` is about twice ``serial``; while
    another program keeps one core busy ``parallel`` halves, while ``serial`` does not, and
    neither does the speed of a release's one-threaded work."""

    parallel: float
    serial: float


def machine_rate(width: int = 8192, repeats: int = 3) -> MachineRate:
    """:class:`MachineRate` of this machine: the best of ``repeats`` convolutions of two
    ``width``-entry nodes on every core and on one, alternately (about 40 and 80 ms each on
    a laptop). For forecasts (:class:`dpcounts.release.cost.Cost`); it reads no data."""
    import time

    values = np.linspace(1.0, 2.0, 2 * width)
    low = values * 2.0**-60
    starts = np.array([0, width], np.int64)
    lengths = np.array([width, width], np.int64)
    left, right = np.zeros(1, np.int64), np.ones(1, np.int64)
    out_starts, out_lengths = np.zeros(1, np.int64), np.array([2 * width - 1], np.int64)
    out_hi, out_lo = np.empty(2 * width - 1), np.empty(2 * width - 1)
    best = {True: float("inf"), False: float("inf")}
    for _ in range(repeats + 1):  # the first calls may load or compile the code
        for parallel in best:
            start = time.perf_counter()
            convolve_level(
                values, low, starts, lengths, left, right, out_starts, out_lengths, out_hi,
                out_lo, parallel=parallel,
            )  # fmt: skip
            best[parallel] = min(best[parallel], time.perf_counter() - start)
    work = float(width) * width
    return MachineRate(work / max(best[True], 1e-9), work / max(best[False], 1e-9))
