"""Aggregate Study 1's scores: median and 95% band over the L datasets, plus the truth; and
the behaviour Quick (2021) reports, measured on that summary (checks.json)."""

import logging

import pandas as pd

from dpsynth.io import write_json, write_parquet
from dpsynth.studies.study1 import behaviour_checks, county_means, summarise_scores

logging.basicConfig(filename=snakemake.log[0], level=logging.INFO, force=True)
scores = pd.concat([pd.read_parquet(path) for path in snakemake.input.scores], ignore_index=True)
sums = pd.concat([pd.read_parquet(path) for path in snakemake.input.county_sums], ignore_index=True)
summary = summarise_scores(scores, snakemake.input.scenarios)
logging.info("summary: %d rows", len(summary))
write_parquet(summary, snakemake.output.summary)
write_parquet(county_means(sums), snakemake.output.county_means)
write_json(behaviour_checks(summary), snakemake.output.checks)
