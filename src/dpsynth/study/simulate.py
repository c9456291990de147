"""A study's calibrations and draws: one arm, a chunk of its epsilons (and datasets).

Calibrations see only public inputs (the total, the populations, the prior rates); they
are stored as a table, one row per stratum and epsilon, and come back exactly (the
epsilon column holds the grid's own float64, matched by equality).
"""

from __future__ import annotations

import logging
import time

import numpy as np
import pandas as pd

from dpsynth.calibration import Calibration
from dpsynth.study.definition import Arm, StudyDefinition
from dpsynth.study.measures import Measures

CALIBRATION_COLUMNS = ["epsilon", "cell", "a", "b", "lower", "upper", "total", "tail",
                       "inflation"]  # fmt: skip
STATUS_COLUMNS = ["arm", "epsilon", "ok", "error"]
log = logging.getLogger(__name__)


def calibrate_arm(
    definition: StudyDefinition, arm: Arm, epsilon: float, strata: pd.DataFrame
) -> Calibration:
    """The calibration of ``arm`` at ``epsilon`` from the strata's public columns."""
    from dpsynth.privacy.calibrate import calibrate

    total = int(strata[definition.count].sum())  # y. is public; the counts are not used
    population = strata[definition.population].to_numpy(dtype=float)
    prior = strata["prior_rate"].to_numpy(dtype=float)
    options = {}
    if arm.mechanism == "truncated":
        tail = definition.tail if definition.tail is not None else 1.0 / len(strata)
        options = {"tail": tail, "inflation": definition.inflation}
    return calibrate(arm.mechanism, epsilon, total, population, prior, method=arm.method,
                     **options)  # fmt: skip


def calibration_frame(cal: Calibration) -> pd.DataFrame:
    """One row per stratum: epsilon, a, b, bounds, total, tail, inflation."""
    lower, upper = cal.bounds()
    return pd.DataFrame(
        {
            "epsilon": cal.epsilon,
            "cell": np.arange(cal.n_cells),
            "a": cal.a,
            "b": np.full(cal.n_cells, np.nan) if cal.b is None else cal.b,
            "lower": lower,
            "upper": upper,
            "total": cal.total,
            "tail": np.nan if cal.tail is None else cal.tail,
            "inflation": cal.inflation,
        }
    )[CALIBRATION_COLUMNS]


def calibrate_chunk(
    definition: StudyDefinition, arm: Arm, strata: pd.DataFrame, echunk: str
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The calibrations of ``arm`` over the epsilon chunk ``echunk`` (``e{i}``), as a table
    (:func:`calibration_frame` rows, an ``arm`` column first), and the status of each
    epsilon (``STATUS_COLUMNS``). An epsilon that cannot be calibrated stops the study
    (``on_calibration_failure: fail``) or is recorded as skipped (``skip``)."""
    from dpsynth.design import epsilon_chunk

    frames, status = [], []
    for epsilon in epsilon_chunk(echunk, definition.epsilons, definition.epsilons_per_job):
        start = time.perf_counter()
        try:
            cal = calibrate_arm(definition, arm, epsilon, strata)
        except (ValueError, RuntimeError) as error:
            if definition.on_calibration_failure == "fail":
                raise RuntimeError(
                    f"{arm.label} at epsilon={epsilon:g} cannot be calibrated: {error}. Set "
                    f"studies.{definition.name}.on_calibration_failure: skip to leave it out"
                ) from error
            log.warning("%s at epsilon=%g skipped: %s", arm.label, epsilon, error)
            status.append((arm.label, epsilon, False, str(error)))
            continue
        # timings go to the log only: artifacts are the same bytes on every run
        log.info("%s at epsilon=%g: %.2f s, median a %.4g", arm.label, epsilon,
                 time.perf_counter() - start, float(np.median(cal.a)))  # fmt: skip
        frames.append(calibration_frame(cal))
        status.append((arm.label, epsilon, True, ""))
    frame = (
        pd.concat(frames, ignore_index=True)
        if frames
        else pd.DataFrame(columns=CALIBRATION_COLUMNS)
    )
    frame.insert(0, "arm", arm.label)
    return frame, pd.DataFrame(status, columns=STATUS_COLUMNS)


def calibration_from_frame(
    frame: pd.DataFrame, arm: Arm, epsilon: float, strata: pd.DataFrame, population: str
) -> Calibration:
    """Inverse of :func:`calibration_frame` (epsilon matched exactly)."""
    rows = frame[frame["epsilon"].to_numpy() == epsilon].sort_values("cell")
    if rows.empty:
        raise KeyError(f"no calibration of {arm.label} at epsilon={epsilon!r}")
    truncated = arm.mechanism == "truncated"
    return Calibration(
        arm.mechanism,
        arm.method,
        float(epsilon),
        int(rows["total"].iloc[0]),
        rows["a"].to_numpy(),
        None if arm.mechanism == "md" else rows["b"].to_numpy(),
        strata[population].to_numpy(dtype=float),
        None if arm.mechanism == "md" else strata["prior_rate"].to_numpy(dtype=float),
        rows["lower"].to_numpy() if truncated else None,
        rows["upper"].to_numpy() if truncated else None,
        tail=float(rows["tail"].iloc[0]) if truncated else None,
        inflation=float(rows["inflation"].iloc[0]),
    )


def draw_and_measure(
    y,
    cal: Calibration,
    measures: Measures,
    n_datasets: int,
    rng: np.random.Generator,
    *,
    batch: int = 100,
) -> tuple[pd.DataFrame, np.ndarray]:
    """``n_datasets`` synthetic tables under ``cal``, each measured; and the sum over them
    of every area's rate (for maps: sums of chunks add up to a mean over all datasets).

    The exact sampler is built once; draws come ``batch`` at a time.
    """
    from dpsynth.sampling.conditioned import ConditionedSampler

    sampler = ConditionedSampler(y, cal)
    frames, area_sum = [], np.zeros(len(measures.areas))
    for start in range(0, n_datasets, batch):
        z = sampler.draw(min(batch, n_datasets - start), rng)
        frames.append(measures.values(z, y))
        if measures.areas:
            area_sum += measures.area_rates(z).sum(axis=0)
    return pd.concat(frames, ignore_index=True), area_sum


def simulate_chunk(
    definition: StudyDefinition,
    arm: Arm,
    strata: pd.DataFrame,
    calibrations: pd.DataFrame,
    chunk: str,
    rng: np.random.Generator,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The draws of job ``chunk`` (``e{i}_d{j}``) of one arm, measured: one row per
    (epsilon, dataset), and per map epsilon the sum and number of each area's rates.
    Epsilons whose calibration was skipped get no datasets."""
    from dpsynth.design import chunk_members
    from dpsynth.study.measures import study_measures

    d = definition
    epsilons, ids = chunk_members(chunk, d.epsilons, d.epsilons_per_job, d.datasets,
                                  d.datasets_per_job)  # fmt: skip
    measures = study_measures(d, strata)
    y = strata[d.count].to_numpy()
    metrics = []
    sums = [pd.DataFrame({"arm": [], "epsilon": [], "area": [], "sum": [],
                          "n": np.array([], dtype=int)})]  # fmt: skip
    for epsilon in epsilons:
        if not (calibrations["epsilon"].to_numpy() == epsilon).any():
            continue  # skipped calibration (on_calibration_failure: skip)
        cal = calibration_from_frame(calibrations, arm, epsilon, strata, d.population)
        values, area_sum = draw_and_measure(y, cal, measures, ids.size, rng, batch=d.batch)
        metrics.append(values.assign(arm=arm.label, epsilon=epsilon, dataset=ids))
        if epsilon in d.map_epsilons:
            sums.append(pd.DataFrame({"arm": arm.label, "epsilon": epsilon,
                                      "area": list(measures.areas), "sum": area_sum,
                                      "n": ids.size}))  # fmt: skip
    columns = ["arm", "epsilon", "dataset"]
    metrics = pd.concat(metrics, ignore_index=True) if metrics else pd.DataFrame()
    if len(metrics):
        metrics = metrics[columns + [c for c in metrics.columns if c not in columns]]
    return metrics, pd.concat(sums, ignore_index=True)
