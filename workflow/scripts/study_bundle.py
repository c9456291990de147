"""A study's draws in one job (job_structure: bundled): for every arm, each epsilon
chunk's calibrations, then each chunk's draws, then the no-privacy reference; each unit
with the stream it has as its own job. The imports, the strata and their measures are
paid once per study, not per arm."""

import logging

import pandas as pd

from dpsynth.design import calibration_chunk
from dpsynth.io import write_parquet
from dpsynth.seeding import job_rng
from dpsynth.studies.stage.definition import study_definition
from dpsynth.studies.stage.measures import study_measures
from dpsynth.studies.stage.simulate import calibrate_chunk, reference_metrics, simulate_chunk

logging.basicConfig(filename=snakemake.log[0], level=logging.INFO, force=True)
p, out = snakemake.params, snakemake.output
definition = study_definition(p.study, p.entry)
strata = pd.read_parquet(snakemake.input.strata)
measures = study_measures(definition, strata)
# outputs are arm-major (common.smk's study_chunk_paths): each arm's chunks in turn
calibration_paths, status_paths = iter(out.calibrations), iter(out.status)
metrics_paths, sums_paths = iter(out.metrics), iter(out.area_sums)
for arm in definition.arms:
    calibrations = {}  # each chunk's file: the draws read it back, as their own job would
    for echunk in definition.calibration_chunks:
        frame, status = calibrate_chunk(definition, arm, strata, echunk)
        calibrations[echunk] = next(calibration_paths)
        write_parquet(frame, calibrations[echunk])
        write_parquet(status, next(status_paths))
    for chunk in definition.chunks:
        metrics, area_sums = simulate_chunk(
            definition,
            arm,
            strata,
            pd.read_parquet(calibrations[calibration_chunk(chunk)]),
            chunk,
            job_rng(p.seed, *definition.stream, arm.name, chunk),
            measures=measures,
        )
        logging.info("%s %s: %d rows of measures", arm.name, chunk, len(metrics))
        write_parquet(metrics, next(metrics_paths))
        write_parquet(area_sums, next(sums_paths))
rng = job_rng(p.seed, *definition.stream, "reference")
reference = reference_metrics(definition, strata, rng, measures=measures)
logging.info("%s: %d tables of the no-privacy reference", definition.name, len(reference))
write_parquet(reference, out.reference)
