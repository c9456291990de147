"""A study's summary from its cached chunks: median and 95% band of every measure per arm
and epsilon beside the truth, what the calibrations say (true counts outside the
truncation bounds, skipped calibrations), the area rates behind the maps, and the guide.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from dpsynth.metrics import summarise_draws
from dpsynth.study.definition import StudyDefinition
from dpsynth.study.measures import Measures

SUMMARY_COLUMNS = ["study", "arm", "mechanism", "method", "epsilon", "metric", "median",
                   "lower", "upper", "truth"]  # fmt: skip
AREA_COLUMNS = ["study", "arm", "epsilon", "area", "rate"]


def summarise_study(
    definition: StudyDefinition,
    strata: pd.DataFrame,
    measures: Measures,
    *,
    metrics: pd.DataFrame,
    calibrations: pd.DataFrame,
    status: pd.DataFrame,
) -> pd.DataFrame:
    """Summary rows (:data:`SUMMARY_COLUMNS`).

    ``metrics``: one row per dataset (``arm, epsilon, dataset`` and the measures);
    ``calibrations``: :func:`~dpsynth.study.simulate.calibration_frame` rows with ``arm``;
    ``status``: one row per (arm, epsilon) with ``ok`` and ``error``.
    """
    y = strata[definition.count].to_numpy()
    truth = measures.values(y, y).iloc[0]
    parts = []
    if len(metrics):
        columns = [c for c in metrics.columns if c not in ("arm", "epsilon", "dataset")]
        draws = summarise_draws(metrics, ["arm", "epsilon"], columns)
        draws["truth"] = draws["metric"].map(truth)
        parts.append(draws)
    if len(calibrations):
        cells = calibrations.sort_values(["arm", "epsilon", "cell"])
        true = y[cells["cell"].to_numpy()]
        cells = cells.assign(outside=(true < cells["lower"]) | (true > cells["upper"]))
        share = cells.groupby(["arm", "epsilon"], sort=True)["outside"].mean().reset_index()
        parts.append(share.assign(metric="outside_bounds_share", median=share["outside"],
                                  lower=share["outside"], upper=share["outside"],
                                  truth=0.0).drop(columns="outside"))  # fmt: skip
    skipped = status[~status["ok"].astype(bool)]
    if len(skipped):
        parts.append(pd.DataFrame({"arm": skipped["arm"], "epsilon": skipped["epsilon"],
                                   "metric": "calibration_skipped", "median": 1.0,
                                   "lower": 1.0, "upper": 1.0, "truth": 0.0}))  # fmt: skip
    summary = pd.concat(parts, ignore_index=True)
    arms = {arm.label: arm for arm in definition.arms}
    summary["mechanism"] = summary["arm"].map(lambda a: arms[a].mechanism)
    summary["method"] = summary["arm"].map(lambda a: arms[a].method)
    summary["study"] = definition.name
    return summary[SUMMARY_COLUMNS].sort_values(["arm", "metric", "epsilon"]).reset_index(drop=True)


def area_rates(
    definition: StudyDefinition, strata: pd.DataFrame, measures: Measures, sums: pd.DataFrame
) -> pd.DataFrame:
    """Mean synthetic rate per area at the map epsilons (``sums``: arm, epsilon, area, sum,
    n per chunk) and the true rates (arm ``truth``, epsilon NaN)."""
    y = strata[definition.count].to_numpy()
    true = pd.DataFrame({"arm": "truth", "epsilon": np.nan, "area": list(measures.areas),
                         "rate": measures.area_rates(y)[0]})  # fmt: skip
    parts = [true]
    if len(sums):
        totals = sums.groupby(["arm", "epsilon", "area"], sort=True)[["sum", "n"]].sum()
        parts.append((totals["sum"] / totals["n"]).rename("rate").reset_index())
    out = pd.concat(parts, ignore_index=True)
    out.insert(0, "study", definition.name)
    return out[AREA_COLUMNS]
