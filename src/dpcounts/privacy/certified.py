"""Certified calibration of the (truncated) Poisson-gamma mechanism.

The argument is written out in ``docs/privacy.md``. In short: for the product of NBs
conditioned on its total, with the data clamped to [L, U] and z restricted to [L, U],
moving one event from cell i to cell j changes the log pmf of every z in the support by
at most kappa_i + kappa_j, where

    kappa_k = log((U'_k + L_k + a_k) / (L'_k + L_k + a_k)),
    U'_k = min(U_k, y. - sum_{m != k} L_m),  L'_k = max(L_k, y. - sum_{m != k} U_m)

are the effective bounds of z_k on the support (untruncated: L = 0, U = y.). The success
probabilities p_k cancel, so the populations and prior rates never enter: the guarantee
holds for any number of cells and any prior rates. It suffices that the two largest
kappa sum to at most epsilon; the default gives every cell the budget eps/2.
"""

from __future__ import annotations

import numpy as np

from dpcounts.mechanisms.poisson_gamma import truncated_shape_floor

#: Relative margin by which certified shapes exceed the bound (absorbs rounding).
MARGIN = 1e-12


def effective_bounds(total: int, lower, upper) -> tuple[np.ndarray, np.ndarray]:
    """Range of z_k over the support {L <= z <= U, sum z = y.}: (L'_k, U'_k)."""
    lower = np.asarray(lower, dtype=float)
    upper = np.asarray(upper, dtype=float)
    eff_upper = np.minimum(upper, total - (lower.sum() - lower))
    eff_lower = np.maximum(lower, total - (upper.sum() - upper))
    return eff_lower, eff_upper


def kappa(a, total: int, lower, upper) -> np.ndarray:
    """Per-cell privacy loss bound kappa_k = log((U'_k + L_k + a_k) / (L'_k + L_k + a_k))."""
    a = np.asarray(a, dtype=float)
    lower = np.asarray(lower, dtype=float)
    eff_lower, eff_upper = effective_bounds(total, lower, upper)
    return np.log((eff_upper + lower + a) / (eff_lower + lower + a))


def certified_epsilon(a, total: int, lower, upper) -> float:
    """The proven bound on the realised epsilon: the sum of the two largest kappa."""
    k = np.sort(kappa(a, total, lower, upper))
    return float(k[-1] + k[-2])


def certified_shapes(
    epsilon: float, total: int, lower, upper, *, budgets=None, truncated: bool = True
) -> np.ndarray:
    """Smallest a with kappa_k <= budget_k: a_k = (U'_k - L'_k)/(e^budget_k - 1) - L_k - L'_k.

    ``budgets`` defaults to eps/2 for every cell; any per-cell budgets whose two largest
    values sum to at most epsilon are allowed (an asymmetric split). For truncated
    calibrations the result is raised to the Kerman floor (1/3 where L = 0, 1e-3
    elsewhere); raising a only lowers kappa, so the floors keep the proof.

    With the default budgets, when every cell but one ends up with kappa_k < eps/2 (their
    floors, or pinched effective bounds, make them more private than asked), the one
    remaining cell is given the budget left over, eps - max_{k != i} kappa_k: every pair
    still has kappa_i + kappa_j <= eps.
    """
    lower = np.asarray(lower, dtype=float)
    default = budgets is None
    if default:
        budgets = np.full(lower.size, epsilon / 2.0)
    budgets = np.asarray(budgets, dtype=float)
    if budgets.shape != lower.shape or np.any(~np.isfinite(budgets)) or np.any(budgets <= 0):
        raise ValueError("budgets must be one finite positive number per cell")
    top_two = np.sort(budgets)[-2:].sum()
    if top_two > epsilon * (1 + 1e-12):
        raise ValueError(f"budgets: the two largest sum to {top_two:.6g} > epsilon = {epsilon:.6g}")
    a = _shapes_for_budgets(budgets, total, lower, upper, truncated)
    if default:
        k = kappa(a, total, lower, upper)
        binding = np.flatnonzero(k >= epsilon / 2.0 * (1 - 1e-9))
        if binding.size == 1:
            cell = int(binding[0])
            rest = np.delete(k, cell).max()
            # Keep a hair of the budget back so rounding cannot tip the pair over eps.
            budgets[cell] = (epsilon - rest) * (1 - 1e-12)
            a = _shapes_for_budgets(budgets, total, lower, upper, truncated)
    return a


def _shapes_for_budgets(budgets, total, lower, upper, truncated) -> np.ndarray:
    eff_lower, eff_upper = effective_bounds(total, lower, upper)
    a = (eff_upper - eff_lower) / np.expm1(budgets) - lower - eff_lower
    # Raised by a relative margin so that rounding never puts a below the real bound.
    a = a * (1.0 + MARGIN)
    if truncated:
        return np.maximum(a, truncated_shape_floor(lower))
    # Untruncated: L = L' = 0 and U' = y., so a = y. / (e^budget - 1) > 0 already.
    return a
