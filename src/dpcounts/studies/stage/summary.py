"""A study's summary from its cached chunks: median and 95% band of every measure per arm
and epsilon, with a 95% confidence interval of the median (its Monte Carlo error over the
sets), beside three references: the truth, the prior (the measure of the table the
arm drifts to as epsilon shrinks: the expected counts n x lambda0 for PG and truncated
PG, the uniform table y. / I for MD, whose Dirichlet weights are equal) and the
no-privacy reference (median and band of the measure on tables drawn with the privacy
term removed, :mod:`dpcounts.sampling.reference`: what synthesis alone keeps; the
posterior attacker's prior is its guess with no set, told the range, from the prior's
expected counts for every arm:
:func:`~dpcounts.studies.stage.measures.range_prior_shares`); what the
calibrations say (the gamma shapes a across strata, true counts outside the truncation
bounds, skipped calibrations); and the area rates behind the maps.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from dpcounts.mechanisms import registry
from dpcounts.studies.metrics import BAND_COLUMNS, median_interval, pooled_mean, summarise_frame
from dpcounts.studies.stage.definition import StudyDefinition
from dpcounts.studies.stage.measures import POSTERIOR, Measures, range_prior_shares

SUMMARY_COLUMNS = ["study", "arm", "mechanism", "method", "epsilon", "metric", *BAND_COLUMNS,
                   "median_lower", "median_upper", "truth", "prior", "reference",
                   "reference_lower", "reference_upper", "truth_in_bounds"]  # fmt: skip
#: The no-privacy reference's summary columns, from its median and band.
REFERENCE_COLUMNS = {"median": "reference", "lower": "reference_lower",
                     "upper": "reference_upper"}  # fmt: skip
AREA_COLUMNS = ["study", "arm", "epsilon", "area", "rate"]


def expected_counts(definition: StudyDefinition, strata: pd.DataFrame) -> np.ndarray:
    """n x lambda0 per stratum: the table the prior alone predicts."""
    return strata[definition.population].to_numpy(dtype=float) * strata["prior_rate"].to_numpy()


def _calibration_rows(calibrations: pd.DataFrame, y: np.ndarray) -> list[pd.DataFrame]:
    """Per (arm, epsilon): ``gamma_shape`` (median of a over strata, 2.5-97.5% range),
    ``gamma_shape_max`` and ``outside_bounds_share`` (true counts outside [L, U])."""
    cells = calibrations.sort_values(["arm", "epsilon", "cell"])
    true = y[cells["cell"].to_numpy()]
    cells = cells.assign(outside=(true < cells["lower"]) | (true > cells["upper"]))
    grouped = cells.groupby(["arm", "epsilon"], sort=True)
    shape = summarise_frame(cells, ["arm", "epsilon"], "a")
    top = grouped["a"].max()
    share = grouped["outside"].mean()
    frames = [
        shape.assign(metric="gamma_shape"),
        pd.DataFrame(dict.fromkeys(BAND_COLUMNS, top)).reset_index()
        .assign(metric="gamma_shape_max"),
        pd.DataFrame({**dict.fromkeys(BAND_COLUMNS, share), "truth": 0.0})
        .reset_index().assign(metric="outside_bounds_share"),
    ]  # fmt: skip
    return frames


def _in_bounds(calibrations: pd.DataFrame, measures: Measures, y: np.ndarray) -> pd.DataFrame:
    """Per (arm, epsilon, metric): the measure of the true counts clamped to the
    calibration's bounds [lower, upper] (``truth_in_bounds``)."""
    rows = []
    cells = calibrations.sort_values(["arm", "epsilon", "cell"])
    for (arm, epsilon), group in cells.groupby(["arm", "epsilon"], sort=True):
        clamped = np.clip(y[group["cell"].to_numpy()], group["lower"], group["upper"])
        values = measures.values(clamped.to_numpy(dtype=float), y).iloc[0]
        rows += [(arm, epsilon, metric, value) for metric, value in values.items()]
    return pd.DataFrame(rows, columns=["arm", "epsilon", "metric", "truth_in_bounds"])


def summarise_study(
    definition: StudyDefinition,
    strata: pd.DataFrame,
    measures: Measures,
    *,
    metrics: pd.DataFrame,
    calibrations: pd.DataFrame,
    status: pd.DataFrame,
    reference: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Summary rows (:data:`SUMMARY_COLUMNS`).

    ``metrics``: one row per synthetic set (``arm, epsilon, set`` and the measures);
    ``reference``: one row per table of the no-privacy reference (the measures);
    ``calibrations``: :meth:`~dpcounts.calibration.Calibration.to_frame` rows with ``arm``;
    ``status``: one row per (arm, epsilon) with ``ok`` and ``error``.
    """
    y = strata[definition.count].to_numpy()
    truth = measures.values(y, y).iloc[0]
    prior = measures.values(expected_counts(definition, strata), y).iloc[0]
    parts = []
    if len(metrics):
        columns = [c for c in metrics.columns if c not in ("arm", "epsilon", "set")]
        long = metrics.melt(id_vars=["arm", "epsilon"], value_vars=columns, var_name="metric")
        by = ["arm", "epsilon", "metric"]
        draws = summarise_frame(long, by)
        intervals = long.groupby(by, sort=True, dropna=False)["value"].agg(median_interval)
        draws[["median_lower", "median_upper"]] = intervals.tolist()
        draws["truth"] = draws["metric"].map(truth)
        # the prior alone: each arm's limit as epsilon shrinks, n x lambda0 for PG and
        # truncated PG, the uniform table y. / I for MD (its Dirichlet weights are equal)
        uniform = measures.values(np.full(y.size, y.sum() / y.size), y).iloc[0]
        md = {arm.name for arm in definition.arms
              if not arm.baseline and not registry.family(arm.mechanism).uses_prior}  # fmt: skip
        pairs = zip(draws["arm"], draws["metric"], strict=True)
        # (the mode over sets, mode_shares, has no value for one table: NaN)
        draws["prior"] = [(uniform if arm in md else prior).get(metric, np.nan)
                          for arm, metric in pairs]  # fmt: skip
        if measures.attack is not None:  # the posterior attacker told the range, no set
            told = range_prior_shares(expected_counts(definition, strata), y, *measures.attack)
            posterior = draws["metric"].isin(POSTERIOR)
            draws.loc[posterior, "prior"] = draws.loc[posterior, "metric"].map(told)
        if reference is not None and len(reference):
            ref = summarise_frame(reference.melt(var_name="metric"), ["metric"])
            draws = draws.merge(ref.rename(columns=REFERENCE_COLUMNS), on="metric", how="left")
        if len(calibrations):
            bounded = _in_bounds(calibrations, measures, y)
            draws = draws.merge(bounded, on=["arm", "epsilon", "metric"], how="left")
        parts.append(draws)
    if len(calibrations):
        parts.extend(_calibration_rows(calibrations, y))
    skipped = status[~status["ok"].astype(bool)]
    if len(skipped):
        parts.append(pd.DataFrame({"arm": skipped["arm"], "epsilon": skipped["epsilon"],
                                   "metric": "calibration_skipped",
                                   **dict.fromkeys(BAND_COLUMNS, 1.0), "truth": 0.0}))  # fmt: skip
    summary = pd.concat(parts, ignore_index=True)
    arms = {arm.name: arm for arm in definition.arms}
    summary["mechanism"] = summary["arm"].map(lambda a: arms[a].mechanism)
    summary["method"] = summary["arm"].map(lambda a: arms[a].method)
    summary["study"] = definition.name
    summary = summary.reindex(columns=SUMMARY_COLUMNS)
    return summary[SUMMARY_COLUMNS].sort_values(["arm", "metric", "epsilon"]).reset_index(drop=True)


def area_rates(
    definition: StudyDefinition, strata: pd.DataFrame, measures: Measures, sums: pd.DataFrame
) -> pd.DataFrame:
    """Mean synthetic rate per area at the map epsilons (``sums``: arm, epsilon, area, sum,
    n per chunk), the true rates (arm ``truth``, epsilon NaN) and those of the expected
    counts (arm ``prior``)."""
    y = strata[definition.count].to_numpy()
    parts = [
        pd.DataFrame({"arm": label, "epsilon": np.nan, "area": list(measures.areas),
                      "rate": measures.area_rates(counts)[0]})
        for label, counts in (("truth", y), ("prior", expected_counts(definition, strata)))
    ]  # fmt: skip
    if len(sums):
        parts.append(pooled_mean(sums, ["arm", "epsilon", "area"], "sum", "n"))
    out = pd.concat(parts, ignore_index=True)
    out.insert(0, "study", definition.name)
    return out[AREA_COLUMNS]
