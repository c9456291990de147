"""The toy example of Quick (2022), Section 2.3 and Figure 1: two groups, the untruncated
(paper) and truncated (exact bivariate) calibrations, the privacy ratio against z_1 for the
worst neighbours, and the exact predictive distribution of z_1; all by enumeration."""

from __future__ import annotations

import numpy as np


def calibrations(total: int, expected, epsilon: float, tail: float):
    """The toy example's untruncated (paper) and truncated (exact bivariate) calibrations.

    Two groups with equal prior rates 1/100 and populations 100 * E[y] (only n * lambda0
    matters for the bounds; with I = 2 the exact calibration is exactly eps-DP).
    """
    from dpcounts.privacy.calibrate import calibrate

    expected = np.asarray(expected, dtype=float)
    population = expected * 100.0
    prior = np.full(2, 0.01)
    untruncated = calibrate("pg", epsilon, total, population, prior, method="paper")
    truncated = calibrate("truncated", epsilon, total, population, prior, method="exact", tail=tail)
    return untruncated, truncated


def ratio_curve(cal) -> tuple[np.ndarray, np.ndarray, int]:
    """p(z|y) / p(z|x) against z_1 for the worst neighbours y_1 = L_1 + 1, x_1 = L_1.

    Returns (z_1 values, ratios, y_1); exact, by enumeration of the two-cell support.
    """
    from dpcounts.sampling.enumeration import compositions, log_pmf_table

    lower, upper = cal.bounds()
    support = compositions(cal.total, lower, upper)
    y1 = int(lower[0]) + 1
    ys = np.array([[y1, cal.total - y1], [y1 - 1, cal.total - y1 + 1]])
    table = log_pmf_table(cal, ys, support)
    return support[:, 0], np.exp(table[0] - table[1]), y1


def predictive(cal, true_y1: int) -> tuple[np.ndarray, np.ndarray]:
    """The exact distribution of z_1 given y = (true_y1, y. - true_y1): (z_1, P(z_1 | y))."""
    from dpcounts.sampling.enumeration import compositions, log_pmf_table

    support = compositions(cal.total, *cal.bounds())
    ys = np.array([[true_y1, cal.total - true_y1]])
    return support[:, 0], np.exp(log_pmf_table(cal, ys, support)[0])
