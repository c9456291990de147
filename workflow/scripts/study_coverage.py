"""A study's coverage measure (issue #54, item 2): per arm, epsilon, method and quantity,
the share of the intervals from a release's sets that hold the confidential value
(``coverage.parquet``; the summary rule puts its rows in words into ``guide.csv``)."""

import logging

import pandas as pd

from dpcounts.fast_exit import fast_exit
from dpcounts.io import write_parquet
from dpcounts.studies.stage.coverage import coverage_table
from dpcounts.studies.stage.definition import study_definition

logging.basicConfig(filename=snakemake.log[0], level=logging.INFO, force=True)
d = study_definition(snakemake.wildcards.study, snakemake.params.entry)
strata = pd.read_parquet(snakemake.input.strata)
frames = [f for f in map(pd.read_parquet, snakemake.input.calibrations) if len(f)]
calibrations = pd.concat(frames, ignore_index=True)
write_parquet(coverage_table(d, strata, calibrations, snakemake.params.seed),
              snakemake.output.coverage)  # fmt: skip
fast_exit()  # outputs written: skip the interpreter's teardown
