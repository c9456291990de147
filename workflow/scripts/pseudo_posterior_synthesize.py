"""Synthetic data of every synthesizer of one data set, and their utility statistics."""

import json
import logging

import pandas as pd

from dpcounts.fast_exit import fast_exit
from dpcounts.io import write_parquet
from dpcounts.seeding import job_rng
from dpcounts.studies.pseudo_posterior.synthesis import synthetic_tables
from dpcounts.studies.pseudo_posterior.tables import load_fits

logging.basicConfig(filename=snakemake.log[0], level=logging.INFO, force=True)
fits = load_fits(
    pd.read_parquet(snakemake.input.draws),
    pd.read_parquet(snakemake.input.records),
    json.loads(open(snakemake.input.fits).read()),
)
utility, synthetic = synthetic_tables(
    fits,
    snakemake.params.datasets,
    job_rng(snakemake.params.seed, "pseudo_posterior", snakemake.wildcards.dataset, "synthesis"),
)
write_parquet(utility, snakemake.output.utility)
write_parquet(synthetic, snakemake.output.synthetic)
fast_exit()  # outputs written: skip the interpreter's teardown
