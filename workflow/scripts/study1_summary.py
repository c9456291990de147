"""Aggregate Study 1's scores: median and 95% band over the L datasets, plus the truth; and
the behaviour Quick (2021) reports, measured on that summary (checks.json)."""

import logging

from dpcounts.fast_exit import fast_exit
from dpcounts.io import write_json, write_parquet
from dpcounts.studies.study1 import summarise_run

logging.basicConfig(filename=snakemake.log[0], level=logging.INFO, force=True)
inputs, out = snakemake.input, snakemake.output
summary, means, checks = summarise_run(inputs.scores, inputs.county_sums, inputs.scenarios)
logging.info("summary: %d rows", len(summary))
write_parquet(summary, out.summary)
write_parquet(means, out.county_means)
write_json(checks, out.checks)
fast_exit()  # outputs written: skip the interpreter's teardown
