"""The compiled loop of the geometric baseline's post-processing: integer rows projected
onto the simplex and rounded, one row after another in machine code.

:func:`project_and_round_rows` writes, for each integer row, exactly what
``largest_remainder_round(project_to_simplex(row, total), total)`` of
:mod:`dpcounts.baselines.geometric` gives (the tests compare the two bit for bit), in
linear time: a histogram of the row's values instead of sorts.

The projection's threshold. project_to_simplex sorts the values descending (o_0 >= o_1
>= ...) and keeps the last k with o_k - C_k / (k + 1) > 0, C_k = o_0 + ... + o_k - total;
theta = C_k / (k + 1). With integer values C_k is an exact integer in float64 and the test
is the exact o_k (k + 1) > C_k: C_k / (k + 1) is either o_k or at least 1 / (k + 1) away
from it, far more than the rounding of the division. Within a run of equal values m
(starting at k0 = N(> m), the number of values above m) the test reads m N(> m) - S(> m) +
total > 0 (S: their sum) whatever k, and it holds for the largest values only (its left
side does not decrease with m). So the kept k is N(>= m*) - 1 for the smallest value m*
that passes, and theta = (S(>= m*) - total) / N(>= m*), the same division of the same two
numbers.

The rounding. largest_remainder_round adds one to the ``missing`` entries first in the
stable order of decreasing remainder: every entry whose remainder exceeds f*, the
missing-th largest remainder (counting every entry; an entry's remainder is its value's,
by the same operations), then the entries equal to f* in index order.

Kept apart from :mod:`dpcounts.baselines.geometric` so that importing the baseline does
not import numba; the module is imported when integer rows are first post-processed.
"""

from __future__ import annotations

import numba
import numpy as np

from dpcounts import compile_cache

#: Cache the machine code on disk when numba can write it somewhere (dpcounts.compile_cache).
CACHE = compile_cache.available(__file__)


@numba.njit(cache=CACHE)
def project_and_round_rows(counts, totals, out):  # pragma: no cover
    """Write into ``out[r]`` the projection of integer row ``counts[r]`` onto {v >= 0,
    sum v = totals[r]}, rounded by largest remainders (ties to the lower index). Returns
    the index of the first row it could not do (no value passes the projection's test,
    i.e. the total is not positive, or the rounding would miss more units than the row
    has cells: the callers' reference raises its own error there), or -1."""
    m, n = counts.shape
    for row in range(m):
        values = counts[row]
        total = totals[row]
        lowest = values.min()
        histogram = np.zeros(values.max() - lowest + 1, dtype=np.int64)
        count_all = n
        sum_all = 0
        for i in range(n):
            histogram[values[i] - lowest] += 1
            sum_all += values[i]
        # The smallest value m* passing m N(> m) - S(> m) + total > 0, ascending.
        below_n = 0  # N(< m)
        below_s = 0  # S(< m)
        first = -1
        at_least_n = 0
        at_least_s = 0
        for k in range(histogram.size):
            number = histogram[k]
            if number == 0:
                continue
            value = k + lowest
            above_n = count_all - below_n - number
            above_s = sum_all - below_s - number * value
            if value * above_n - above_s + total > 0:
                first = value
                at_least_n = count_all - below_n
                at_least_s = sum_all - below_s
                break
            below_n += number
            below_s += number * value
        if first < 0:
            return row
        theta = np.float64(at_least_s - total) / np.float64(at_least_n)
        floored = 0
        for i in range(n):
            projected = np.float64(values[i]) - theta
            if projected < 0.0:
                projected = 0.0
            whole = np.int64(np.floor(projected))
            out[row, i] = whole
            floored += whole
        missing = total - floored
        if missing < 0 or missing > n:
            return row
        if missing == 0:
            continue
        # The cutoff f*: the missing-th largest remainder, counting every entry (an
        # entry's remainder is its value's, by the same operations).
        present = np.flatnonzero(histogram)
        remainders = np.empty(present.size)
        for j in range(present.size):
            projected = np.float64(present[j] + lowest) - theta
            if projected < 0.0:
                projected = 0.0
            remainders[j] = projected - np.float64(np.int64(np.floor(projected)))
        order = np.argsort(-remainders)
        reached = 0
        cutoff = 0.0
        for j in range(order.size):
            reached += histogram[present[order[j]]]
            if reached >= missing:
                cutoff = remainders[order[j]]
                break
        above = 0
        for i in range(n):
            projected = np.float64(values[i]) - theta
            if projected < 0.0:
                projected = 0.0
            if projected - np.float64(out[row, i]) > cutoff:
                out[row, i] += 1
                above += 1
        ties = missing - above  # the entries at the cutoff, in index order
        for i in range(n):
            if ties == 0:
                break
            projected = np.float64(values[i]) - theta
            if projected < 0.0:
                projected = 0.0
            if projected - np.float64(np.int64(np.floor(projected))) == cutoff:
                out[row, i] += 1
                ties -= 1
    return -1
