"""Record weights of the LW, CW and SW synthesizers (Hu et al. (2020) Algorithms 1 and 2, sec 3).

All weights lie in [0, 1] and decrease with a record's risk, so high-risk records
contribute less to the pseudo likelihood.

- LW (Lipschitz-weighted): risk_i is record i's Lipschitz bound under the unweighted fit,
  rescaled linearly to [0, 1]; alpha_i = c (1 - risk_i) + g, clipped to [0, 1].
- CW (count-weighted): risk_i is the share of records outside the ball of radius r around
  y_i (an isolated record is easier to identify); alpha_i = c (1 - risk_i) + g, clipped.
- SW (scalar-weighted): one weight for every record, the exponential mechanism with a
  log-likelihood utility; its value is set by ``equal_privacy`` to match LW's Delta.
"""

from __future__ import annotations

import numpy as np


def _linear_weights(risk: np.ndarray, c: float, g: float) -> np.ndarray:
    if not c > 0:
        raise ValueError(f"c must be positive, got {c!r}")
    return np.clip(c * (1.0 - risk) + g, 0.0, 1.0)


def rescale_unit(values: np.ndarray) -> np.ndarray:
    """(x - min x) / (max x - min x); all zeros when every value is the same."""
    values = np.asarray(values, dtype=float)
    span = values.max() - values.min()
    return np.zeros_like(values) if span == 0 else (values - values.min()) / span


def lw_weights(unweighted_record_bounds: np.ndarray, c: float = 1.0, g: float = 0.0):
    """Algorithm 1 step 3-4: weights from the unweighted fit's record Lipschitz bounds."""
    bounds = np.asarray(unweighted_record_bounds, dtype=float)
    if bounds.ndim != 1 or bounds.size == 0 or np.any(bounds < 0):
        raise ValueError("record bounds must be a non-empty vector of non-negative values")
    return _linear_weights(rescale_unit(bounds), c, g)


def identification_risk(y: np.ndarray, radius: float, relative: bool = True) -> np.ndarray:
    """Share of records j with |y_j - y_i| > r_i; r_i = radius * y_i if relative else radius."""
    y = np.asarray(y, dtype=float)
    if y.ndim != 1 or y.size == 0:
        raise ValueError("y must be a non-empty vector")
    if not radius >= 0:
        raise ValueError(f"cw.radius must be non-negative, got {radius!r}")
    r = radius * np.abs(y) if relative else np.full_like(y, radius)
    ordered = np.sort(y)
    inside = np.searchsorted(ordered, y + r, side="right") - np.searchsorted(
        ordered, y - r, side="left"
    )
    return 1.0 - inside / y.size


def cw_weights(y, radius: float, relative: bool = True, c: float = 1.0, g: float = 0.0):
    """Algorithm 2: weights decreasing in the identification risk of each record."""
    return _linear_weights(identification_risk(y, radius, relative), c, g)


def scale_weights(weights: np.ndarray, scale: float) -> np.ndarray:
    """scale * weights, clipped to [0, 1] (how a weighted synthesizer is tuned to a Delta)."""
    if not scale >= 0:
        raise ValueError(f"scale must be non-negative, got {scale!r}")
    return np.clip(scale * np.asarray(weights, dtype=float), 0.0, 1.0)
