"""Study 1's Appendix C summary: the older age groups' summaries with an age_group column."""

import logging

import pandas as pd

from dpcounts.fast_exit import fast_exit
from dpcounts.io import write_parquet
from dpcounts.studies.study1 import stack_age_groups

logging.basicConfig(filename=snakemake.log[0], level=logging.INFO, force=True)
groups = snakemake.params.age_groups
frames = [pd.read_parquet(path) for path in snakemake.input]
summary = stack_age_groups(dict(zip(groups, frames, strict=True)))
logging.info("appendix C: %d rows for %s", len(summary), groups)
write_parquet(summary, snakemake.output[0])
fast_exit()  # outputs written: skip the interpreter's teardown
