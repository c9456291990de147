"""A study's calibrations and draws: one arm, a chunk of its epsilons (and sets).

Calibrations see only public inputs (the total, the populations, the prior rates); they
are stored in their table form (:meth:`dpcounts.calibration.Calibration.to_frame`, one row
per stratum and epsilon, an ``arm`` column first) and come back exactly
(:meth:`~dpcounts.calibration.Calibration.from_frame`), each found by its epsilon's label.
"""

from __future__ import annotations

import logging
import time

import numpy as np
import pandas as pd

from dpcounts.arms import Arm
from dpcounts.calibration import FRAME_COLUMNS, Calibration
from dpcounts.design import at_epsilon
from dpcounts.mechanisms import registry
from dpcounts.studies.stage.definition import StudyDefinition
from dpcounts.studies.stage.measures import Measures, mode_shares, posterior_shares

STATUS_COLUMNS = ["arm", "epsilon", "ok", "error"]
log = logging.getLogger(__name__)


def _measures(definition: StudyDefinition, strata: pd.DataFrame) -> Measures:
    from dpcounts.studies.stage.measures import study_measures

    return study_measures(definition, strata)


def calibrate_arm(
    definition: StudyDefinition, arm: Arm, epsilon: float, strata: pd.DataFrame
) -> Calibration:
    """The calibration of ``arm`` at ``epsilon`` from the strata's public columns."""
    from dpcounts.privacy.calibrate import calibrate

    total = int(strata[definition.count].sum())  # y. is public; the counts are not used
    population = strata[definition.population].to_numpy(dtype=float)
    prior = strata["prior_rate"].to_numpy(dtype=float)
    options = {}
    if registry.family(arm.mechanism).bounded:
        tail = definition.tail if definition.tail is not None else 1.0 / len(strata)
        options = {"tail": tail, "inflation": definition.inflation}
    return calibrate(arm.mechanism, epsilon, total, population, prior, method=arm.method,
                     **options)  # fmt: skip


def calibrate_chunk(
    definition: StudyDefinition, arm: Arm, strata: pd.DataFrame, echunk: str
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The calibrations of ``arm`` over the epsilon chunk ``echunk`` (``e{i}``), as a table
    (:meth:`~dpcounts.calibration.Calibration.to_frame` rows, an ``arm`` column first), and
    the status of each epsilon (``STATUS_COLUMNS``). An epsilon that cannot be calibrated
    stops the study (``on_calibration_failure: fail``) or is recorded as skipped
    (``skip``)."""
    from dpcounts.design import epsilon_chunk

    frames, status = [], []
    for epsilon in epsilon_chunk(echunk, definition.epsilons, definition.epsilons_per_job):
        start = time.perf_counter()
        try:
            cal = calibrate_arm(definition, arm, epsilon, strata)
        except (ValueError, RuntimeError) as error:
            if definition.on_calibration_failure == "fail":
                raise RuntimeError(
                    f"{arm.name} at epsilon={epsilon:g} cannot be calibrated: {error}. Set "
                    f"studies.{definition.name}.on_calibration_failure: skip to leave it out"
                ) from error
            log.warning("%s at epsilon=%g skipped: %s", arm.name, epsilon, error)
            status.append((arm.name, epsilon, False, str(error)))
            continue
        # timings go to the log only: artifacts are the same bytes on every run
        log.info("%s at epsilon=%g: %.2f s, median a %.4g", arm.name, epsilon,
                 time.perf_counter() - start, float(np.median(cal.a)))  # fmt: skip
        frames.append(cal.to_frame())
        status.append((arm.name, epsilon, True, ""))
    frame = (
        pd.concat(frames, ignore_index=True)
        if frames
        else pd.DataFrame(columns=list(FRAME_COLUMNS))
    )
    frame.insert(0, "arm", arm.name)
    return frame, pd.DataFrame(status, columns=STATUS_COLUMNS)


def arm_calibration(
    definition: StudyDefinition, arm: Arm, rows: pd.DataFrame, strata: pd.DataFrame
) -> Calibration:
    """``arm``'s calibration from its rows of one epsilon (of :func:`calibrate_chunk`'s
    table), with the strata's public populations and prior rates."""
    return Calibration.from_frame(
        rows,
        arm.mechanism,
        arm.method,
        strata[definition.population].to_numpy(dtype=float),
        strata["prior_rate"].to_numpy(dtype=float),
    )


def draw_and_measure(
    y,
    cal: Calibration,
    measures: Measures,
    n_sets: int,
    rng: np.random.Generator,
    *,
    batch: int = 100,
    prior_expected=None,
) -> tuple[pd.DataFrame, np.ndarray]:
    """``n_sets`` synthetic sets (tables) under ``cal``, each measured; and the sum over
    them of every area's rate (for maps: sums of chunks add up to a mean over all sets).
    ``prior_expected``: the public prior's expected counts, the posterior attacker's prior
    (:func:`~dpcounts.studies.stage.measures.posterior_shares`; None: the calibration's
    predictive means).

    The exact sampler is built once; draws come ``batch`` at a time.
    """
    from dpcounts.sampling.study_mode import StudySampler

    sampler = StudySampler(y, cal)
    frames, area_sum = [], np.zeros(len(measures.areas))
    for start in range(0, n_sets, batch):
        z = sampler.draw(min(batch, n_sets - start), rng)
        values = measures.values(z, y)
        if measures.attack is not None and measures.attack_sets > 1:  # the mode over sets
            values = values.assign(**mode_shares(z, y, *measures.attack, measures.attack_sets))
        if measures.attack is not None:  # the hyperparameters with the release's sets
            values = values.assign(
                **posterior_shares(z, y, cal, *measures.attack, measures.attack_sets,
                                   prior_expected)
            )  # fmt: skip
        frames.append(values)
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
    *,
    measures: Measures | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The draws of job ``chunk`` (``e{i}_d{j}``) of one arm, measured: one row per
    (epsilon, set), and per map epsilon the sum and number of each area's rates.
    Epsilons whose calibration was skipped get no sets. ``measures``: the strata's
    :func:`~dpcounts.studies.stage.measures.study_measures`, when a job that runs many
    chunks has built them once (built here otherwise; the same either way)."""
    from dpcounts.design import chunk_members

    d = definition
    epsilons, ids = chunk_members(chunk, d.epsilons, d.epsilons_per_job, d.sets,
                                  d.sets_per_job)  # fmt: skip
    if measures is None:
        measures = _measures(d, strata)
    y = strata[d.count].to_numpy()
    expected = strata[d.population].to_numpy(dtype=float) * strata["prior_rate"].to_numpy()
    metrics = []
    sums = [pd.DataFrame({"arm": [], "epsilon": [], "area": [], "sum": [],
                          "n": np.array([], dtype=int)})]  # fmt: skip
    for epsilon in epsilons:
        rows = calibrations[at_epsilon(calibrations["epsilon"], epsilon)]
        if rows.empty:
            continue  # skipped calibration (on_calibration_failure: skip)
        cal = arm_calibration(d, arm, rows, strata)
        values, area_sum = draw_and_measure(y, cal, measures, ids.size, rng, batch=d.batch,
                                            prior_expected=expected)  # fmt: skip
        metrics.append(values.assign(arm=arm.name, epsilon=epsilon, set=ids))
        if d.map_epsilons and at_epsilon([epsilon], d.map_epsilons)[0]:
            sums.append(pd.DataFrame({"arm": arm.name, "epsilon": epsilon,
                                      "area": list(measures.areas), "sum": area_sum,
                                      "n": ids.size}))  # fmt: skip
    columns = ["arm", "epsilon", "set"]
    metrics = pd.concat(metrics, ignore_index=True) if metrics else pd.DataFrame()
    if len(metrics):
        metrics = metrics[columns + [c for c in metrics.columns if c not in columns]]
    return metrics, pd.concat(sums, ignore_index=True)


def reference_metrics(
    definition: StudyDefinition,
    strata: pd.DataFrame,
    rng: np.random.Generator,
    *,
    measures: Measures | None = None,
) -> pd.DataFrame:
    """The measures of ``definition.sets`` tables drawn from the no-privacy reference
    (:func:`dpcounts.sampling.reference.no_privacy_draws`: every arm's limit as epsilon
    grows, truncation dropped), one row per table (``set`` and the measures), drawn
    ``definition.batch`` at a time. ``measures``: as :func:`simulate_chunk`'s."""
    from dpcounts.sampling.reference import no_privacy_draws

    if measures is None:
        measures = _measures(definition, strata)
    y = strata[definition.count].to_numpy()
    n, frames = definition.sets, []
    for start in range(0, n, definition.batch):
        z = no_privacy_draws(y, min(definition.batch, n - start), rng)
        frames.append(measures.values(z, y))
    out = pd.concat(frames, ignore_index=True)
    out.insert(0, "set", np.arange(n))
    return out


def simulate_study(
    definition: StudyDefinition,
    strata: pd.DataFrame,
    seed: int,
    *,
    calibrations: list[str],
    status: list[str],
    metrics: list[str],
    area_sums: list[str],
    reference: str,
) -> None:
    """A whole study's draws in one process (``job_structure: bundled``), written to the
    given files: for every arm, each epsilon chunk's calibrations and their status, then
    each draw chunk's metrics and area sums, then the no-privacy reference. Each unit draws
    from the stream its own job has (:func:`dpcounts.seeding.job_rng` of the seed, the
    study's stream, the arm and the chunk), and each chunk's draws read its calibrations
    back from their file, as their own job would: the files are the same bytes as the
    split jobs'. The strata's measures are built once for all arms. The path lists are
    arm-major (each arm's chunks in turn, in ``definition.calibration_chunks`` and
    ``definition.chunks`` order), as the workflow lists its outputs."""
    from dpcounts.design import calibration_chunk
    from dpcounts.io import write_parquet
    from dpcounts.seeding import job_rng
    from dpcounts.studies.stage.measures import study_measures

    measures = study_measures(definition, strata)
    calibration_paths, status_paths = iter(calibrations), iter(status)
    metrics_paths, sums_paths = iter(metrics), iter(area_sums)
    for arm in definition.arms:
        written = {}  # each epsilon chunk's file: the draws read it back
        for echunk in definition.calibration_chunks:
            frame, arm_status = calibrate_chunk(definition, arm, strata, echunk)
            written[echunk] = next(calibration_paths)
            write_parquet(frame, written[echunk])
            write_parquet(arm_status, next(status_paths))
        for chunk in definition.chunks:
            values, sums = simulate_chunk(
                definition,
                arm,
                strata,
                pd.read_parquet(written[calibration_chunk(chunk)]),
                chunk,
                job_rng(seed, *definition.stream, arm.name, chunk),
                measures=measures,
            )
            log.info("%s %s: %d rows of measures", arm.name, chunk, len(values))
            write_parquet(values, next(metrics_paths))
            write_parquet(sums, next(sums_paths))
    rng = job_rng(seed, *definition.stream, "reference")
    table = reference_metrics(definition, strata, rng, measures=measures)
    log.info("%s: %d tables of the no-privacy reference", definition.name, len(table))
    write_parquet(table, reference)
