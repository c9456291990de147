"""Map of Pennsylvania's county crude lung-cancer rates (pennLC, 2002 cases / 2000 pop.)."""

import logging

from dpcounts.data.pennsylvania import (
    county_crude_rates,
    load_pennlc,
    load_pennsylvania_counties,
)
from dpcounts.fast_exit import fast_exit
from dpcounts.io import save_figure
from dpcounts.plots.maps import county_choropleth

logging.basicConfig(filename=snakemake.log[0], level=logging.INFO, force=True)

counties = load_pennsylvania_counties(snakemake.input.counties)
rates = county_crude_rates(load_pennlc(snakemake.input.strata))
counties = counties.merge(rates, on="county", how="left")
logging.info("%d counties, %d cases", len(counties), counties["cases"].sum())
fig = county_choropleth(
    counties,
    "rate",
    title="Pennsylvania lung cancer, crude rate by county (pennLC: 2002 cases, 2000 pop.)",
    legend_label="cases per 100,000",
    values_name="the county rates",
    edgecolor="grey",
    linewidth=0.3,
)
save_figure(fig, *snakemake.output)
fast_exit()  # outputs written: skip the interpreter's teardown
