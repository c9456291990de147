"""Fit a weighted synthesizer whose overall Lipschitz bound Delta matches a target.

Hu et al. (2020) compares LW, CW and SW "scaled to have equivalent local Delta", and its
re-weighting must leave Delta unchanged. Delta is a property of the fitted posterior, so
matching it takes a few rounds: choose the weights' free constant (a scale, or Algorithm
3's k) so that Delta *predicted on the latest fit's draws* equals the target, refit, and
stop once the refit's Delta is within ``tolerance`` (relative) of the target. The fit
closest to the target is returned with the whole history, so the residual gap, which is
Monte Carlo noise (of NUTS or of exact draws) plus the posterior's response to its own
weights, is reported, never hidden.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from dpcounts.studies.pseudo_posterior.lipschitz import (
    LipschitzBounds,
    check_quantile,
    lipschitz_bounds,
    record_bounds_on,
)
from dpcounts.studies.pseudo_posterior.posterior import PosteriorFit
from dpcounts.studies.pseudo_posterior.reweighting import reweight
from dpcounts.studies.pseudo_posterior.weights import scale_weights


@dataclass(frozen=True)
class EqualDeltaSettings:
    tolerance: float = 0.03
    max_iterations: int = 4

    def __post_init__(self):
        if not self.tolerance > 0:
            raise ValueError(f"equal_delta.tolerance must be positive, got {self.tolerance!r}")
        if not isinstance(self.max_iterations, int) or self.max_iterations < 1:
            raise ValueError(
                f"equal_delta.max_iterations must be a positive integer, got "
                f"{self.max_iterations!r}"
            )


@dataclass
class TunedFit:
    fit: PosteriorFit
    bounds: LipschitzBounds
    constant: float  # the scale (CW, SW) or Algorithm 3's k (re-weighting)
    target: float
    history: list[dict] = field(default_factory=list)

    @property
    def relative_gap(self) -> float:
        return self.bounds.delta / self.target - 1.0


def predicted_delta(loglik: np.ndarray, weights: np.ndarray, quantile: float) -> float:
    return lipschitz_bounds(weights[None, :] * loglik, quantile).delta


def equal_columns(matrix: np.ndarray, head: int = 8) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(matrix.T, axis=0, return_inverse=True)`` (the distinct columns, as rows
    in lexicographic order, and each column's index among them), found from the first
    ``head`` rows and then checked on every row: where columns agree on those rows but
    not on all, the full comparison is made. When the check passes, columns of different
    groups differ within the first rows, so the order and indices are np.unique's, at the
    cost of a gather instead of a sort of whole columns."""
    keys, group = np.unique(matrix[:head].T, axis=0, return_inverse=True)
    group = group.reshape(-1)
    first = np.full(len(keys), group.size)
    np.minimum.at(first, group, np.arange(group.size))  # each group's first column
    if np.array_equal(matrix, matrix[:, first[group]]):
        return np.ascontiguousarray(matrix[:, first].T), group
    columns, group = np.unique(matrix.T, axis=0, return_inverse=True)
    return columns, group.reshape(-1)


def scale_for_delta(
    loglik: np.ndarray, base_weights: np.ndarray, target: float, quantile: float
) -> float:
    """Scale s with Delta(clip(s * base_weights)) = target on these draws (bisection).

    Delta is non-decreasing in s. If even all-ones weights stay below the target, the
    largest useful scale (every weight 1) is returned.
    """
    base_weights = np.asarray(base_weights, dtype=float)
    positive = base_weights[base_weights > 0]
    if positive.size == 0:
        raise ValueError("base weights are all zero: no scale can reach a positive Delta")
    if not target > 0:
        raise ValueError(f"target Delta must be positive, got {target!r}")
    # |w_i l_si| = w_i |l_si| exactly (w_i >= 0): take |loglik| once, not in every step
    magnitude = np.abs(np.asarray(loglik, dtype=float))
    if magnitude.ndim != 2 or 0 in magnitude.shape or not np.all(np.isfinite(magnitude)):
        raise ValueError("loglik must be a finite (draws, records) matrix")
    check_quantile(quantile)
    high = 1.0 / positive.min()
    # Records with equal columns (the same count: a log-likelihood per distinct count) are
    # taken once, with their largest base weight: per draw, max_i |l_si| w_i over equal
    # columns is |l_s| times the largest w_i (x -> |l| x and b -> clip(s b) are monotone in
    # floating point), so every Delta below is the same number to the bit.
    columns, group = equal_columns(magnitude)
    largest = np.zeros(len(columns))
    np.maximum.at(largest, group, base_weights)
    magnitude = np.ascontiguousarray(columns.T)

    def delta_at(scale: float) -> float:
        weights = scale_weights(largest, scale)
        return float(np.quantile((magnitude * weights[None, :]).max(axis=1), quantile))

    if delta_at(high) <= target:
        return float(high)
    low = 0.0
    for _ in range(60):
        mid = 0.5 * (low + high)
        if delta_at(mid) < target:
            low = mid
        else:
            high = mid
    return float(0.5 * (low + high))


def scaled_weights_rule(base_weights: np.ndarray, target: float, quantile: float):
    """Weights of CW or SW on a reference fit: base weights times the matching scale."""

    def weights_for(reference: PosteriorFit) -> tuple[np.ndarray, float]:
        scale = scale_for_delta(reference.loglik, base_weights, target, quantile)
        return scale_weights(base_weights, scale), scale

    return weights_for


def reweighted_rule(base_weights: np.ndarray, target: float, quantile: float):
    """Algorithm 3's weights on a reference fit (its kept draws give the record bounds)."""

    def weights_for(reference: PosteriorFit) -> tuple[np.ndarray, float]:
        kept = lipschitz_bounds(reference.weighted_loglik, quantile).kept
        result = reweight(base_weights, record_bounds_on(reference.loglik, kept), target)
        return result.weights, result.constant

    return weights_for


def fit_at_delta(
    weights_for: Callable[[PosteriorFit], tuple[np.ndarray, float]],
    fit_with: Callable[[np.ndarray], PosteriorFit],
    reference: PosteriorFit,
    target: float,
    quantile: float,
    settings: EqualDeltaSettings,
) -> TunedFit:
    """Refit with ``weights_for(latest fit)`` until Delta is within tolerance of ``target``."""
    best = None
    history = []
    for iteration in range(settings.max_iterations):
        weights, constant = weights_for(reference)
        fit = fit_with(weights)
        bounds = lipschitz_bounds(fit.weighted_loglik, quantile)
        tuned = TunedFit(fit, bounds, constant, target)
        history.append(
            {
                "iteration": iteration,
                "constant": constant,
                "delta": bounds.delta,
                "relative_gap": tuned.relative_gap,
            }
        )
        if best is None or abs(tuned.relative_gap) < abs(best.relative_gap):
            best = tuned
        if abs(tuned.relative_gap) <= settings.tolerance:
            break
        reference = fit
    best.history = history
    return best
