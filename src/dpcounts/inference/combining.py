"""The combining rules for fully synthetic data (Raghunathan, Reiter and Rubin 2003).

M synthetic sets give each quantity an estimate q_m and a variance u_m; :func:`combine`
gives, over the sets:

* the estimate q_M = mean of q_m;
* b_M, the variance of the q_m across the sets, and u_M, the mean of the u_m;
* the variance T_f = (1 + 1/M) b_M - u_M, with nu_f = (M - 1) (1 - M u_M / ((M + 1)
  b_M))^2 degrees of freedom (Raghunathan, Reiter and Rubin 2003; Reiter 2002): the
  interval is q_M +- t_{nu_f} sqrt(T_f);
* where T_f <= 0 (which happens when the sets barely differ), the documented adjustment
  T* = (n_syn / n) u_M (Reiter 2002, section 3), here u_M (a synthetic set has the
  table's own size), with a normal quantile; ``adjusted`` says where.

``dpcounts estimate --method combining`` (:mod:`dpcounts.release.estimate`) and a study's
coverage (:mod:`dpcounts.studies.stage.coverage`) both combine here.
"""

from __future__ import annotations

import numpy as np


def combine(estimates, variances, level: float = 0.9) -> dict:
    """The combining rules for fully synthetic data over M sets (rows of ``estimates`` and
    ``variances``, one column per quantity; module docstring): a dict of arrays
    ``estimate``, ``variance``, ``df``, ``lower``, ``upper`` and ``adjusted``."""
    from scipy import stats

    q = np.atleast_2d(np.asarray(estimates, dtype=float))
    u = np.atleast_2d(np.asarray(variances, dtype=float))
    if q.shape != u.shape:
        raise ValueError(f"estimates {q.shape} and variances {u.shape} must have one shape")
    m = q.shape[0]
    if m < 2:
        raise ValueError(f"the combining rules need at least 2 synthetic sets, got {m}")
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level!r}")
    mean = q.mean(axis=0)
    between = q.var(axis=0, ddof=1)
    within = u.mean(axis=0)
    total = (1 + 1 / m) * between - within
    adjusted = ~(total > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        df = (m - 1) * (1 - m * within / ((m + 1) * between)) ** 2
    variance = np.where(adjusted, within, total)
    df = np.where(adjusted, np.inf, df)
    quantile = np.where(np.isfinite(df), stats.t.ppf(0.5 + level / 2, np.where(
        np.isfinite(df), df, 1.0)), stats.norm.ppf(0.5 + level / 2))  # fmt: skip
    half = quantile * np.sqrt(variance)
    return {"estimate": mean, "variance": variance, "df": df, "lower": mean - half,
            "upper": mean + half, "adjusted": adjusted}  # fmt: skip
