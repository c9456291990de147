"""The checks of a sampler's inputs: the confidential counts (one vector, or the rows of
many datasets) and a calibration's bounds.

:func:`count_values` is the one check that an array holds counts (finite, non-negative
integers); :func:`check_counts` and :func:`check_count_rows` add the shape and the total a
calibration asks for, and every other check of confidential counts calls it too (Study 1's
datasets, the geometric baseline's, the suppression rule's table).
"""

from __future__ import annotations

import numpy as np

from dpcounts.calibration import Calibration


def count_values(values, name: str = "y") -> np.ndarray:
    """``values`` (an array of any shape) as int64 after checking it holds finite,
    non-negative integers (integer or whole floating-point numbers): the array itself when
    it is an int64 array already (it needs no conversion and no comparison with one; a
    study checks the same datasets for every arm and epsilon), else a converted copy.
    ``name`` is what the errors call it."""
    arr = np.asarray(values)
    if arr.dtype == np.int64:
        if np.any(arr < 0):
            raise ValueError(f"{name} must hold non-negative integers, got minimum {arr.min()}")
        return arr
    if arr.dtype.kind not in "iuf" or not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must hold finite numbers, got dtype {arr.dtype}")
    counts = arr.astype(np.int64)
    if np.any(counts != arr):
        raise ValueError(f"{name} must hold non-negative integers, got non-whole {arr.dtype}")
    if np.any(counts < 0):
        raise ValueError(f"{name} must hold non-negative integers, got minimum {counts.min()}")
    return counts


def _check_calibration(cal) -> None:
    if not isinstance(cal, Calibration):
        raise TypeError(f"cal must be a dpcounts.calibration.Calibration, got {type(cal)}")


def check_counts(y, cal: Calibration) -> np.ndarray:
    """``y`` as int64 after checking it is a vector of non-negative integers summing to y."""
    _check_calibration(cal)
    arr = np.asarray(y)
    if arr.ndim != 1 or arr.size != cal.n_cells:
        raise ValueError(f"y must be a vector of {cal.n_cells} counts, got shape {arr.shape}")
    counts = count_values(arr)
    if counts.sum() != cal.total:
        raise ValueError(f"y sums to {counts.sum()}, but the calibration's total is {cal.total}")
    return counts


def check_count_rows(ys, cal: Calibration) -> np.ndarray:
    """:func:`check_counts` of every row of the 2-D ``ys`` at once: int64 (m, I) (``ys``
    itself when it is an int64 array already, :func:`count_values`)."""
    _check_calibration(cal)
    arr = np.asarray(ys)
    if arr.ndim != 2 or arr.shape[1] != cal.n_cells:
        raise ValueError(f"ys must be rows of {cal.n_cells} counts, got shape {arr.shape}")
    counts = count_values(arr)
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
