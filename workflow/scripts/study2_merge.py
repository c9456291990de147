"""Stack the scenarios' summaries into results/study2/summary.parquet."""

import logging

import pandas as pd

from dpsynth.io import write_parquet

logging.basicConfig(filename=snakemake.log[0], level=logging.INFO, force=True)
summary = pd.concat([pd.read_parquet(path) for path in snakemake.input], ignore_index=True)
logging.info("%d rows from %d scenario(s)", len(summary), len(snakemake.input))
write_parquet(summary, snakemake.output[0])
