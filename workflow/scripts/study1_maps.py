"""County maps of the true rates and the mean synthetic rates (scenario 4)."""

import pandas as pd

from dpcounts.data.counties import load_counties
from dpcounts.fast_exit import fast_exit
from dpcounts.io import save_figure
from dpcounts.plots.study1 import figure_maps
from dpcounts.studies.study1 import Study1Design

figure = figure_maps(
    load_counties(snakemake.input.counties),
    pd.read_parquet(snakemake.input.scenario),
    pd.read_parquet(snakemake.input.county_means),
    epsilons=Study1Design.from_config(snakemake.params.design).map_epsilons,
)
save_figure(figure, *snakemake.output)
fast_exit()  # outputs written: skip the interpreter's teardown
