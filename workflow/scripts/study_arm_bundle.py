"""One arm of a study in one job (job_structure: bundled): every epsilon chunk's
calibrations, then every chunk's draws, each chunk with the stream it has as its own job."""

import logging

import pandas as pd

from dpsynth.design import calibration_chunk
from dpsynth.io import write_parquet
from dpsynth.seeding import job_rng
from dpsynth.studies.stage.definition import study_definition
from dpsynth.studies.stage.simulate import calibrate_chunk, simulate_chunk

logging.basicConfig(filename=snakemake.log[0], level=logging.INFO, force=True)
p, out = snakemake.params, snakemake.output
definition = study_definition(p.study, p.entry)
arm = definition.arm(snakemake.wildcards.arm)
strata = pd.read_parquet(snakemake.input.strata)
calibrations = dict(zip(definition.calibration_chunks, out.calibrations, strict=True))
for echunk, status_path in zip(definition.calibration_chunks, out.status, strict=True):
    frame, status = calibrate_chunk(definition, arm, strata, echunk)
    write_parquet(frame, calibrations[echunk])
    write_parquet(status, status_path)
outputs = zip(definition.chunks, out.metrics, out.area_sums, strict=True)
for chunk, metrics_path, sums_path in outputs:
    metrics, area_sums = simulate_chunk(
        definition,
        arm,
        strata,
        pd.read_parquet(calibrations[calibration_chunk(chunk)]),
        chunk,
        job_rng(p.seed, *definition.stream, arm.name, chunk),
    )
    logging.info("%s %s: %d rows of measures", arm.name, chunk, len(metrics))
    write_parquet(metrics, metrics_path)
    write_parquet(area_sums, sums_path)
