"""A study's draws in one job (job_structure: bundled): for every arm, each epsilon
chunk's calibrations, then each chunk's draws, then the no-privacy reference; each unit
with the stream it has as its own job (dpcounts.studies.stage.simulate.simulate_study).
The imports, the strata and their measures are paid once per study, not per arm."""

import logging

import pandas as pd

from dpcounts.fast_exit import fast_exit
from dpcounts.studies.stage.definition import study_definition
from dpcounts.studies.stage.simulate import simulate_study

logging.basicConfig(filename=snakemake.log[0], level=logging.INFO, force=True)
p, out = snakemake.params, snakemake.output
simulate_study(
    study_definition(p.study, p.entry),
    pd.read_parquet(snakemake.input.strata),
    p.seed,
    calibrations=list(out.calibrations),
    status=list(out.status),
    metrics=list(out.metrics),
    area_sums=list(out.area_sums),
    reference=out.reference,
)
fast_exit()  # outputs written: skip the interpreter's teardown
