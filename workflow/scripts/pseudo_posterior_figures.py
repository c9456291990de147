"""The figures of Hu et al. (2020) for one data set, all drawn in this one job."""

import logging

import pandas as pd

from dpcounts.fast_exit import fast_exit
from dpcounts.io import save_figure
from dpcounts.plots.pseudo_posterior import dataset_figures

logging.basicConfig(filename=snakemake.log[0], level=logging.INFO, force=True)
dataset = snakemake.wildcards.dataset
tables = {key: pd.read_parquet(path) for key, path in snakemake.input.items()}
for kind, figure in dataset_figures(tables, dataset).items():
    save_figure(figure, *snakemake.output[kind])
    logging.info("%s %s: %s", dataset, kind, list(snakemake.output[kind]))
fast_exit()  # outputs written: skip the interpreter's teardown
