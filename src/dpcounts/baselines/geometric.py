"""Output perturbation with the two-sided geometric (discrete Laplace) mechanism.

Noise e_i with P(e_i = k) proportional to exp(-eps |k| / Delta) is added to every count
(Ghosh, Roughgarden and Sundararajan 2012; the baseline of Quick (2021), Section 4 and Quick (2022)
sec 4). Under the move-one-event neighbour relation two neighbouring count vectors differ
by 1 in two cells, so the L1 sensitivity is Delta = 2 and the noisy vector is eps-DP:
for every noisy v, p(v | y) / p(v | x) = exp(-eps/2 * sum_i (|v_i - y_i| - |v_i - x_i|))
<= exp(eps).

The release post-processes the noisy counts to non-negative integers that sum to the
public total y. (post-processing costs no privacy):

1. Euclidean projection of the noisy vector onto the scaled simplex
   {v : v_i >= 0, sum v_i = y.} (Duchi et al. 2008, sort-based, exact);
2. largest-remainder rounding: floor every entry, then give the missing units to the
   entries with the largest fractional parts (ties to the lower index).
"""

from __future__ import annotations

import numpy as np

from dpcounts.privacy.discrete_laplace import geometric_noise
from dpcounts.sampling.bounds import count_values


def project_to_simplex(values, total: float) -> np.ndarray:
    """Euclidean projection of ``values`` onto {v >= 0, sum v = total} (exact, sort-based)."""
    values = np.asarray(values, dtype=float)
    ordered = np.sort(values)[::-1]
    cumulative = np.cumsum(ordered) - total
    index = np.arange(1, values.size + 1)
    rho = np.flatnonzero(ordered - cumulative / index > 0)[-1]
    theta = cumulative[rho] / (rho + 1)
    return np.maximum(values - theta, 0.0)


def largest_remainder_round(values, total: int) -> np.ndarray:
    """Integers summing to ``total``: floors plus one for the largest fractional parts."""
    values = np.asarray(values, dtype=float)
    floors = np.floor(values).astype(np.int64)
    missing = int(total - floors.sum())
    if missing < 0 or missing > values.size:
        raise ValueError("values must be non-negative and sum to total before rounding")
    order = np.argsort(-(values - floors), kind="stable")
    floors[order[:missing]] += 1
    return floors


def _post_process(noisy: np.ndarray, totals) -> np.ndarray:
    """Noisy rows -> non-negative integers, row r summing to ``totals[r]`` (project, round).

    Row r is ``largest_remainder_round(project_to_simplex(noisy[r], total), total)``;
    integer rows (the noisy counts) take the compiled
    :func:`dpcounts.baselines.rounding_kernel.project_and_round_rows`, which gives the same
    integers in linear time (its docstring proves it); a row it cannot do goes through
    the reference, which raises its error.
    """
    noisy = np.asarray(noisy)
    out = np.empty(noisy.shape, dtype=np.int64)
    if noisy.dtype.kind not in "iu":
        for row, total in enumerate(totals):
            total = int(total)
            out[row] = largest_remainder_round(project_to_simplex(noisy[row], total), total)
        return out
    from dpcounts.baselines.rounding_kernel import project_and_round_rows

    counts = np.ascontiguousarray(noisy, dtype=np.int64)
    totals = np.asarray(totals, dtype=np.int64)
    start = 0
    while start < len(counts):
        failed = project_and_round_rows(counts[start:], totals[start:], out[start:])
        if failed < 0:
            break
        row = start + failed
        total = int(totals[row])
        out[row] = largest_remainder_round(project_to_simplex(counts[row], total), total)
        start = row + 1
    return out


def geometric_release(y, epsilon: float, size: int, rng: np.random.Generator) -> np.ndarray:
    """``size`` eps-DP synthetic count vectors (rows): y + noise, projected and rounded.

    Each row is non-negative and sums to y. = sum(y). The noise uses Delta = 2.
    """
    y = count_values(y, "y")
    if y.ndim != 1:
        raise ValueError("y must be a 1-D array of non-negative integer counts")
    if not (isinstance(size, (int, np.integer)) and size >= 1):
        raise ValueError(f"size must be a positive integer, got {size!r}")
    noisy = y[None, :] + geometric_noise(epsilon, (size, y.size), rng)
    return _post_process(noisy, np.full(size, y.sum()))


def geometric_release_each(datasets, epsilon: float, rng: np.random.Generator) -> np.ndarray:
    """One eps-DP synthetic vector per row of ``datasets`` (each row its own confidential y).

    Row r is distributed as ``geometric_release(datasets[r], epsilon, 1, rng)[0]``; the noise
    of all rows is drawn in one call (the exact sampler's fixed cost is paid once). Each
    output row is non-negative and sums to the total of its dataset.
    """
    datasets = count_values(datasets, "datasets")
    if datasets.ndim != 2:
        raise ValueError("datasets must be a 2-D array (one dataset of counts per row)")
    noisy = datasets + geometric_noise(epsilon, datasets.shape, rng)
    return _post_process(noisy, datasets.sum(axis=1))
