"""Simulate one data set of Hu et al. (2020), Section 3 from its configured mixture."""

import logging

import pandas as pd

from dpcounts.fast_exit import fast_exit
from dpcounts.io import write_parquet
from dpcounts.seeding import job_rng
from dpcounts.studies.pseudo_posterior.simulate import simulate_counts

logging.basicConfig(filename=snakemake.log[0], level=logging.INFO, force=True)
dataset = snakemake.wildcards.dataset
spec = snakemake.params.spec
rng = job_rng(snakemake.params.seed, "pseudo_posterior", dataset)
y = simulate_counts(spec["size"], spec["components"], rng)
logging.info("%s: %d records, mean %.2f, max %d", dataset, y.size, y.mean(), y.max())
write_parquet(pd.DataFrame({"record": range(y.size), "y": y}), snakemake.output.data)
fast_exit()  # outputs written: skip the interpreter's teardown
