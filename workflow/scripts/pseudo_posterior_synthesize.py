"""Synthetic data of every synthesizer of one data set, and their utility statistics."""

import json
import logging

import numpy as np
import pandas as pd

from dpsynth.io import write_parquet
from dpsynth.pseudo_posterior.synthesis import synthetic_datasets, utility_statistics
from dpsynth.pseudo_posterior.tables import DATA, load_fits
from dpsynth.seeding import job_rng

logging.basicConfig(filename=snakemake.log[0], level=logging.INFO, force=True)
dataset = snakemake.wildcards.dataset
metadata = json.loads(open(snakemake.input.fits).read())
fits = load_fits(
    pd.read_parquet(snakemake.input.draws), pd.read_parquet(snakemake.input.records), metadata
)
rng = job_rng(snakemake.params.seed, "pseudo_posterior", dataset, "synthesis")

y = next(iter(fits.values())).y
utility = [utility_statistics(y).assign(synthesizer=DATA, replicate=0)]
synthetic = [pd.DataFrame({"synthesizer": DATA, "record": np.arange(y.size), "value": y})]
for name, fit in fits.items():
    sets = synthetic_datasets(fit, snakemake.params.datasets, rng)
    utility.append(utility_statistics(sets).assign(synthesizer=name, replicate=range(len(sets))))
    synthetic.append(
        pd.DataFrame({"synthesizer": name, "record": np.arange(y.size), "value": sets[0]})
    )
    logging.info("%s: %d synthetic data sets", name, len(sets))
write_parquet(pd.concat(utility, ignore_index=True), snakemake.output.utility)
write_parquet(pd.concat(synthetic, ignore_index=True), snakemake.output.synthetic)
