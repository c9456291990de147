"""Calibrate one arm of a study over one chunk of its epsilon grid."""

import logging

import pandas as pd

from dpcounts.fast_exit import fast_exit
from dpcounts.io import write_parquet
from dpcounts.studies.stage.definition import study_definition
from dpcounts.studies.stage.simulate import calibrate_chunk

logging.basicConfig(filename=snakemake.log[0], level=logging.INFO, force=True)
w = snakemake.wildcards
definition = study_definition(w.study, snakemake.params.entry)
arm = definition.arm(w.arm)
frame, status = calibrate_chunk(definition, arm, pd.read_parquet(snakemake.input.strata), w.echunk)
write_parquet(frame, snakemake.output.calibrations)
write_parquet(status, snakemake.output.status)
fast_exit()  # outputs written: skip the interpreter's teardown
