"""The epsilon guide: for each arm and measure, the smallest epsilon of the grid from
which on (at it and at every larger epsilon of the grid) the synthetic tables keep the
measure within a tolerance of the truth.

With tolerance t (``guide.tolerance``) for the median over datasets and the wider T
(``guide.band_tolerance``) for the 95% band:

* ``disparity:*``: |median / truth - 1| <= t; the band within truth x [1 - T, 1 + T].
* ``rank_correlation``: 1 - median <= t; 1 - lower <= T.
* ``rmse``: median / overall true rate <= t; upper / overall true rate <= T (the rMSE
  of the strata rates as a share of the table's overall rate).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from dpsynth.units import PER_100K

#: Summary rows about calibrations, not measured on draws: no guide criterion.
CALIBRATION_METRICS = ("gamma_shape", "gamma_shape_max", "outside_bounds_share",
                       "calibration_skipped")  # fmt: skip
GUIDE_COLUMNS = ["arm", "measure", "criterion", "tolerance", "epsilon"]


def _met(measure: str, rows: pd.DataFrame, overall: float, tol: float, band: float):
    """Per row: (median within tol, band within band)."""
    med, lo, hi, truth = (rows[c].to_numpy(dtype=float) for c in ("median", "lower",
                                                                   "upper", "truth"))  # fmt: skip
    with np.errstate(invalid="ignore", divide="ignore"):
        if measure.startswith("disparity:"):
            return (np.abs(med / truth - 1) <= tol,
                    (lo >= truth * (1 - band)) & (hi <= truth * (1 + band)))  # fmt: skip
        if measure == "rank_correlation":
            return 1 - med <= tol, 1 - lo <= band
        if measure == "rmse":
            return med / overall <= tol, hi / overall <= band
    raise ValueError(f"no guide criterion for measure {measure!r}")


def smallest_epsilon(epsilons: np.ndarray, met: np.ndarray) -> float:
    """The smallest epsilon from which ``met`` holds at every larger one (NaN: never)."""
    order = np.argsort(epsilons)
    epsilons, met = epsilons[order], met[order]
    if not met.size or not met[-1]:
        return float("nan")
    failing = np.flatnonzero(~met)
    return float(epsilons[failing[-1] + 1] if failing.size else epsilons[0])


def epsilon_guide(summary: pd.DataFrame, overall_rate: float, tolerance: float,
                  band_tolerance: float) -> pd.DataFrame:  # fmt: skip
    """The guide table from a study summary (rows of arms over epsilons with ``truth``).

    ``overall_rate`` is the table's true overall rate per 100,000 (the scale of rmse).
    """
    rows = []
    calibration = summary["metric"].isin(CALIBRATION_METRICS)
    draws = summary[~calibration & summary["median"].notna()]
    for (arm, measure), group in draws.groupby(["arm", "metric"], sort=True):
        med, band = _met(measure, group, overall_rate, tolerance, band_tolerance)
        eps = group["epsilon"].to_numpy(dtype=float)
        rows.append((arm, measure, "median", tolerance, smallest_epsilon(eps, med)))
        rows.append((arm, measure, "95% band", band_tolerance, smallest_epsilon(eps, band)))
    return pd.DataFrame(rows, columns=GUIDE_COLUMNS)


def study_guide(definition, strata: pd.DataFrame, summary: pd.DataFrame) -> pd.DataFrame:
    """:func:`epsilon_guide` of a study, its rMSE scaled by the table's true overall rate."""
    overall = strata[definition.count].sum() / strata[definition.population].sum() * PER_100K
    guide = epsilon_guide(summary, overall, definition.tolerance, definition.band_tolerance)
    guide.insert(0, "study", definition.name)
    return guide
