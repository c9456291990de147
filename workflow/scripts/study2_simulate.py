"""Draw one chunk of Study 2's synthetic datasets (epsilons x datasets) and measure each."""

import logging

import pandas as pd

from dpsynth.design import chunk_members
from dpsynth.io import write_parquet
from dpsynth.seeding import job_rng
from dpsynth.study2 import calibration_from_frame, load_study, simulate

logging.basicConfig(filename=snakemake.log[0], level=logging.INFO, force=True)
p, w = snakemake.params, snakemake.wildcards
strata, adjuster, ratios = load_study(
    snakemake.input.strata,
    snakemake.input.counties,
    snakemake.input.standard_population,
    p.race_comparison,
    p.subgroups,
)
calibrations = pd.read_parquet(snakemake.input.calibrations)
status = pd.read_parquet(snakemake.input.status)
epsilons, ids = chunk_members(
    w.chunk, p.epsilons, p.epsilons_per_job, p.datasets, p.datasets_per_job
)
rng = job_rng(p.seed, "study2", w.scenario, w.mechanism, w.chunk)
y = strata["cases"].to_numpy()
metrics, counties = [], []
for epsilon in epsilons:
    if not status.loc[status["epsilon"] == epsilon, "ok"].all():
        logging.warning("%s at epsilon=%g: no calibration, no datasets", w.mechanism, epsilon)
        continue
    cal = calibration_from_frame(calibrations, w.mechanism, epsilon)
    m, c = simulate(y, cal, adjuster, ratios, ids.size, rng, batch=p.batch)
    for frame in (m, c):
        frame.insert(0, "dataset", ids)
        frame.insert(0, "epsilon", epsilon)
        frame.insert(0, "mechanism", w.mechanism)
    logging.info("%s at epsilon=%g: %d datasets", w.mechanism, epsilon, ids.size)
    metrics.append(m)
    counties.append(c)
metrics = pd.concat(metrics, ignore_index=True) if metrics else pd.DataFrame()
counties = pd.concat(counties, ignore_index=True) if counties else pd.DataFrame()
write_parquet(metrics, snakemake.output.metrics)
write_parquet(counties, snakemake.output.counties)
