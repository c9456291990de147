"""Map of Study 1's true county rates per 100,000 (ages 35-44, 1980)."""

import logging

import pandas as pd
from matplotlib.ticker import FuncFormatter

from dpsynth.data.counties import load_counties
from dpsynth.io import save_figure
from dpsynth.plots.maps import county_choropleth

logging.basicConfig(filename=snakemake.log[0], level=logging.INFO, force=True)
counties = load_counties(snakemake.input.counties)
truth = pd.read_parquet(snakemake.input.truth, columns=["fips", "rate_per_100k"])
frame = counties.merge(truth, on="fips", how="left", validate="one_to_one")
label = "modelled truth" if snakemake.params.source == "model" else "smoothed observed rates"
logging.info("%d counties, %d without a rate", len(frame), frame["rate_per_100k"].isna().sum())
fig = county_choropleth(
    frame,
    "rate_per_100k",
    title=f"True heart-disease death rates, ages 35-44, 1980 ({label})",
    cmap="magma_r",
    norm="log",
    legend_label="deaths per 100,000 (log scale)",
)
# plain numbers (20, 30, ..., 100) on the log colour bar instead of 2 x 10^1
plain = FuncFormatter(lambda value, _: f"{value:g}")
fig.axes[-1].yaxis.set_major_formatter(plain)
fig.axes[-1].yaxis.set_minor_formatter(plain)
save_figure(fig, *snakemake.output)
