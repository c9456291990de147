"""Maps of a study's true and mean synthetic area rates at its map epsilons."""

import logging

import geopandas as gpd
import pandas as pd

from dpcounts.fast_exit import fast_exit
from dpcounts.io import save_figure
from dpcounts.plots.study import figure_maps
from dpcounts.studies.stage.definition import study_definition

logging.basicConfig(filename=snakemake.log[0], level=logging.INFO, force=True)
d = study_definition(snakemake.wildcards.study, snakemake.params.entry)
path = snakemake.input.geometry
geometry = gpd.read_parquet(path) if path.endswith((".parquet", ".pq")) else gpd.read_file(path)
area_rates = pd.read_parquet(snakemake.input.area_rates)
figure = figure_maps(
    geometry,
    d.geometry_key,
    area_rates,
    d.arms,
    list(d.map_epsilons),
    d.title,
    d.geometry_outline,
    label="rate per 100,000" if d.denominator == "population" else d.rate_unit,
)
save_figure(figure, *snakemake.output)
fast_exit()  # outputs written: skip the interpreter's teardown
