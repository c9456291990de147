"""Map of the modelled 1980 population aged 35-44 per county (every map's colour rule)."""

import logging

from dpcounts.data.age_groups import age_group_wide, load_age_groups
from dpcounts.data.counties import load_counties
from dpcounts.fast_exit import fast_exit
from dpcounts.io import save_figure
from dpcounts.plots.maps import county_choropleth

logging.basicConfig(filename=snakemake.log[0], level=logging.INFO, force=True)

counties = load_counties(snakemake.input.counties)
ages = age_group_wide(load_age_groups(snakemake.input.age_groups))
counties = counties.merge(ages[["35-44"]], left_on="fips", right_index=True, how="left")
logging.info("%d counties, modelled 35-44 total %.0f", len(counties), counties["35-44"].sum())
fig = county_choropleth(
    counties,
    "35-44",
    title="Population aged 35-44 by county, 1980 (modelled)",
    legend_label="people aged 35-44, modelled",
    values_name="the county populations",
)
save_figure(fig, *snakemake.output)
fast_exit()  # outputs written: skip the interpreter's teardown
