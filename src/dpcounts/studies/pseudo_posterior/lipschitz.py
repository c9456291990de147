"""Record-level and overall Lipschitz bounds of a weighted log-likelihood (Hu et al. 2020, sec 2).

Following the seed's R appendix (steps 2-3 and 6-7 of Algorithm 1): removing record i
changes the weighted log-likelihood of draw s by |alpha_i log p(y_i | theta_s)|. For each
draw take the maximum over records; the overall bound Delta is the ``quantile`` of those
per-draw maxima (the appendix's ``thresh``), which trims the few extreme draws of the
sampler. The record-level bound of record i is its maximum over the draws kept by that
threshold (the appendix's ``colMaxs(logthresh_ratio)``), so every record bound is at most
Delta. The guarantee is eps = 2 Delta.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class LipschitzBounds:
    record: np.ndarray  # (n,) bound of each record over the kept draws
    delta: float  # overall bound: quantile of the per-draw maxima
    kept: np.ndarray  # (S,) bool, draws whose maximum is at most delta
    quantile: float

    @property
    def epsilon(self) -> float:
        return 2.0 * self.delta


def check_quantile(quantile: float) -> float:
    if not 0 < quantile <= 1:
        raise ValueError(f"lipschitz_quantile must lie in (0, 1], got {quantile!r}")
    return float(quantile)


def lipschitz_bounds(weighted_loglik: np.ndarray, quantile: float) -> LipschitzBounds:
    """Bounds of an (S draws, n records) matrix of weighted record log-likelihoods."""
    quantile = check_quantile(quantile)
    ratio = np.abs(np.asarray(weighted_loglik, dtype=float))
    if ratio.ndim != 2 or 0 in ratio.shape or not np.all(np.isfinite(ratio)):
        raise ValueError("weighted_loglik must be a finite (draws, records) matrix")
    per_draw = ratio.max(axis=1)
    delta = float(np.quantile(per_draw, quantile))
    kept = per_draw <= delta
    return LipschitzBounds(ratio[kept].max(axis=0), delta, kept, quantile)


def record_bounds_on(loglik: np.ndarray, kept: np.ndarray) -> np.ndarray:
    """max over the kept draws of |log p(y_i | theta_s)|, record by record."""
    return np.abs(np.asarray(loglik, dtype=float)[np.asarray(kept, dtype=bool)]).max(axis=0)
