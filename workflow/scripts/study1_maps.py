"""County maps of the true rates and the mean synthetic rates (scenario 4)."""

import pandas as pd

from dpsynth.data.counties import load_counties
from dpsynth.io import save_figure
from dpsynth.plots.study1 import figure_maps
from dpsynth.study1 import Design

figure = figure_maps(
    load_counties(snakemake.input.counties),
    pd.read_parquet(snakemake.input.scenario),
    pd.read_parquet(snakemake.input.county_means),
    epsilons=Design.from_config(snakemake.params.design).map_epsilons,
)
save_figure(figure, *snakemake.output)
