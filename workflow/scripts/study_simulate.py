"""Draw and measure one chunk (epsilons x sets) of one arm of a study."""

import logging

import pandas as pd

from dpcounts.fast_exit import fast_exit
from dpcounts.io import write_parquet
from dpcounts.seeding import job_rng
from dpcounts.studies.stage.definition import study_definition
from dpcounts.studies.stage.simulate import simulate_chunk

logging.basicConfig(filename=snakemake.log[0], level=logging.INFO, force=True)
w = snakemake.wildcards
definition = study_definition(w.study, snakemake.params.entry)
arm = definition.arm(w.arm)
metrics, area_sums = simulate_chunk(
    definition,
    arm,
    pd.read_parquet(snakemake.input.strata),
    pd.read_parquet(snakemake.input.calibrations),
    w.chunk,
    job_rng(snakemake.params.seed, *definition.stream, w.arm, w.chunk),
)
logging.info("%s %s: %d rows of measures", w.arm, w.chunk, len(metrics))
write_parquet(metrics, snakemake.output.metrics)
write_parquet(area_sums, snakemake.output.area_sums)
fast_exit()  # outputs written: skip the interpreter's teardown
