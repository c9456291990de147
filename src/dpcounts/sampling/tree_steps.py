"""Compiled steps of the tree build of the study sampler (:class:`~dpcounts.sampling.
study_mode.StudySampler`), each giving the very bits of the numpy steps it replaces.

* :func:`direct_convolve`: a level's short pairs, rows of zero-padded 2-D arrays. Each
  output entry adds its products in the order of the right row's index, starting from
  zero, one rounded product and one rounded sum a term: what the numpy loop
  ``for j in range(w): conv[:, j : j + w] += left * right[:, j : j + 1]`` does, without
  its w passes over the level and their temporaries.
* :func:`trim_rows`: the first and last kept column of each normalised row after cutting
  each tail whose mass is at most ``cutoff``, and the mass cut. The tails' masses are the
  running sums ``np.cumsum`` forms (a sequential sum from each end), stopped as soon as
  they exceed ``cutoff``: the same numbers, without summing the rest of the row twice.

Neither changes a value the tree stores (``tests/test_sampling_large.py`` checks both
against the numpy steps, and the draws of a seed do not move); they change only how fast
the study sampler builds, which a study pays once per arm and epsilon. numba compiles
without fast-math, so a product and a sum are never fused into one rounding.
"""

from __future__ import annotations

import numba
import numpy as np

from dpcounts import compile_cache

CACHE = compile_cache.available(__file__)


@numba.njit(cache=CACHE)
def direct_convolve(left: np.ndarray, right: np.ndarray, out: np.ndarray) -> None:
    """``out[p, j + i] += left[p, i] * right[p, j]`` for j, then i, ascending: the
    convolutions of the rows of ``left`` and ``right`` (both (pairs, w)) added into the
    zeroed ``out`` (pairs, 2 w - 1), term by term in the numpy loop's order."""
    pairs, width = left.shape
    for p in range(pairs):
        for j in range(width):
            factor = right[p, j]
            for i in range(width):
                out[p, j + i] += left[p, i] * factor


@numba.njit(cache=CACHE)
def trim_rows(prob: np.ndarray, cutoff: float):
    """Per row of ``prob`` (normalised, zero-padded pmfs): the first kept column (the first
    whose running sum from the left exceeds ``cutoff``; 0 if none does), the last (the last
    whose running sum from the right exceeds it; the last column if none does) and the
    mass cut (the running sums just outside them, left plus right)."""
    rows, width = prob.shape
    first = np.zeros(rows, np.int64)
    last = np.full(rows, width - 1, np.int64)
    cut = np.zeros(rows)
    for r in range(rows):
        left_cut = 0.0
        running = prob[r, 0]
        if not running > cutoff:
            for c in range(1, width):
                before = running
                running = running + prob[r, c]
                if running > cutoff:
                    first[r], left_cut = c, before
                    break
        right_cut = 0.0
        running = prob[r, width - 1]
        if not running > cutoff:
            for c in range(width - 2, -1, -1):
                before = running
                running = running + prob[r, c]
                if running > cutoff:
                    last[r], right_cut = c, before
                    break
        cut[r] = left_cut + right_cut
    return first, last, cut
