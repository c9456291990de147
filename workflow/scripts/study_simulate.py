"""Draw and measure one chunk (epsilons x datasets) of one arm of a study."""

import logging

import numpy as np
import pandas as pd

from dpsynth.design import chunk_members
from dpsynth.io import write_parquet
from dpsynth.seeding import job_rng
from dpsynth.study.definition import study_definition
from dpsynth.study.measures import study_measures
from dpsynth.study.simulate import calibration_from_frame, draw_and_measure

logging.basicConfig(filename=snakemake.log[0], level=logging.INFO, force=True)
w = snakemake.wildcards
d = study_definition(w.study, snakemake.params.entry)
arm = next(arm for arm in d.arms if arm.label == w.arm)
strata = pd.read_parquet(snakemake.input.strata)
standard = None
if d.age is not None:
    from dpsynth.data.standard_population import load_standard_population

    standard = load_standard_population(snakemake.input.standard_population)
measures = study_measures(d, strata, standard)
calibrations = pd.read_parquet(snakemake.input.calibrations)
epsilons, ids = chunk_members(
    w.chunk, d.epsilons, d.epsilons_per_job, d.datasets, d.datasets_per_job
)
rng = job_rng(snakemake.params.seed, "studies", w.study, w.arm, w.chunk)
y = strata[d.count].to_numpy()
metrics, sums = [], []
for epsilon in epsilons:
    if not (calibrations["epsilon"].to_numpy() == epsilon).any():
        logging.warning("%s at epsilon=%g: calibration skipped, no datasets", w.arm, epsilon)
        continue
    cal = calibration_from_frame(calibrations, arm, epsilon, strata, d.population)
    values, area_sum = draw_and_measure(y, cal, measures, ids.size, rng)
    values.insert(0, "dataset", ids)
    values.insert(0, "epsilon", epsilon)
    values.insert(0, "arm", w.arm)
    metrics.append(values)
    if epsilon in d.map_epsilons:
        sums.append(pd.DataFrame({"arm": w.arm, "epsilon": epsilon, "area": list(measures.areas),
                                  "sum": area_sum, "n": ids.size}))  # fmt: skip
    logging.info("%s at epsilon=%g: %d datasets", w.arm, epsilon, ids.size)
empty_sums = pd.DataFrame({"arm": [], "epsilon": [], "area": [], "sum": [], "n": np.array([], int)})
write_parquet(
    pd.concat(metrics, ignore_index=True) if metrics else pd.DataFrame(), snakemake.output.metrics
)
write_parquet(
    pd.concat(sums, ignore_index=True) if sums else empty_sums, snakemake.output.area_sums
)
