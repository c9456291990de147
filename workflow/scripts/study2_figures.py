"""Figures 2-6 and the distribution of a for one Study 2 study (pennlc or standin)."""

import logging

import pandas as pd

from dpcounts.data.pennsylvania import load_pennsylvania_counties
from dpcounts.fast_exit import fast_exit
from dpcounts.io import save_figure
from dpcounts.plots.study2 import study_figures
from dpcounts.studies.stage.definition import config_arms, study_definition

logging.basicConfig(filename=snakemake.log[0], level=logging.INFO, force=True)
p, inputs = snakemake.params, snakemake.input
figures = study_figures(
    study_definition(snakemake.wildcards.study, p.entry),
    pd.read_parquet(inputs.strata),
    pd.read_parquet(inputs.summary),
    pd.read_parquet(inputs.area_rates),
    load_pennsylvania_counties(inputs.map),
    arms=config_arms("study2.arms", p.arms),
    primary=p.primary,
    figure5=p.figure5,
    figure6=p.figure6,
)
for stem, figure in figures.items():
    save_figure(figure, *snakemake.output[stem])
fast_exit()  # outputs written: skip the interpreter's teardown
