"""Map of Study 1's true county rates per 100,000 (ages 35-44, 1980)."""

import logging

import pandas as pd

from dpcounts.data.counties import load_counties
from dpcounts.fast_exit import fast_exit
from dpcounts.io import save_figure
from dpcounts.plots.truth import truth_map

logging.basicConfig(filename=snakemake.log[0], level=logging.INFO, force=True)
fig = truth_map(
    load_counties(snakemake.input.counties),
    pd.read_parquet(snakemake.input.truth, columns=["fips", "rate_per_100k"]),
    snakemake.params.source,
)
save_figure(fig, *snakemake.output)
fast_exit()  # outputs written: skip the interpreter's teardown
