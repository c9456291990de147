"""One figure of Hu et al. (2020) for one data set (the figure kind is a wildcard)."""

import logging

import pandas as pd

from dpsynth.io import save_figure
from dpsynth.plots.pseudo_posterior import dataset_figure

logging.basicConfig(filename=snakemake.log[0], level=logging.INFO, force=True)
dataset, kind = snakemake.wildcards.dataset, snakemake.wildcards.figure
tables = {key: pd.read_parquet(path) for key, path in snakemake.input.items()}
save_figure(dataset_figure(kind, tables, dataset), *snakemake.output)
logging.info("%s %s: %s", dataset, kind, list(snakemake.output))
