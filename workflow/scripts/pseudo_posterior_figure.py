"""One figure of Hu et al. (2020) for one data set (the figure kind is a wildcard)."""

import logging

import pandas as pd

from dpsynth.io import save_figure
from dpsynth.plots import pseudo_posterior as plots

logging.basicConfig(filename=snakemake.log[0], level=logging.INFO, force=True)
tables = {key: pd.read_parquet(path) for key, path in snakemake.input.items()}
dataset, kind = snakemake.wildcards.dataset, snakemake.wildcards.figure
summary = tables["summary"]
makers = {
    "lipschitz": lambda: plots.lipschitz_violins(tables["records"], tables["summary"], dataset),
    "weights": lambda: plots.weight_violins(tables["records"], summary, dataset),
    "utility_quantiles": lambda: plots.utility_violins(
        tables["utility"], summary, dataset, ("q15", "q90")
    ),
    "utility_centre": lambda: plots.utility_violins(
        tables["utility"], summary, dataset, ("mean", "median")
    ),
    "posterior_mu": lambda: plots.posterior_density(tables["posterior"], summary, dataset),
    "reweighting": lambda: plots.reweighting_scatter(tables["records"], summary, dataset),
    "synthetic": lambda: plots.synthetic_violins(tables["synthetic"], summary, dataset),
}
save_figure(makers[kind](), *snakemake.output)
logging.info("%s %s: %s", dataset, kind, list(snakemake.output))
