"""A study's map of its suppressed table beside the true and the synthetic area rates
(issue #53, item 3)."""

import logging

import geopandas as gpd
import pandas as pd

from dpcounts.fast_exit import fast_exit
from dpcounts.io import save_figure
from dpcounts.plots.study import figure_suppressed_map
from dpcounts.studies.stage.definition import study_definition

logging.basicConfig(filename=snakemake.log[0], level=logging.INFO, force=True)
d = study_definition(snakemake.wildcards.study, snakemake.params.entry)
path = snakemake.input.geometry
geometry = gpd.read_parquet(path) if path.endswith((".parquet", ".pq")) else gpd.read_file(path)
strata = pd.read_parquet(snakemake.input.strata)
area_rates = pd.read_parquet(snakemake.input.area_rates)
save_figure(figure_suppressed_map(d, strata, geometry, area_rates), *snakemake.output)
fast_exit()  # outputs written: skip the interpreter's teardown
