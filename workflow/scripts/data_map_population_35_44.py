"""Map of the modelled 1980 population aged 35-44 per county (log colour scale)."""

import logging

import matplotlib

matplotlib.use("Agg")

from dpsynth.data.age_groups import age_group_wide, load_age_groups  # noqa: E402
from dpsynth.data.counties import load_counties  # noqa: E402
from dpsynth.io import save_figure  # noqa: E402
from dpsynth.plots.maps import county_choropleth  # noqa: E402

logging.basicConfig(filename=snakemake.log[0], level=logging.INFO, force=True)  # noqa: F821

counties = load_counties(snakemake.input.counties)  # noqa: F821
ages = age_group_wide(load_age_groups(snakemake.input.age_groups))  # noqa: F821
counties = counties.merge(ages[["35-44"]], left_on="fips", right_index=True, how="left")
logging.info("%d counties, modelled 35-44 total %.0f", len(counties), counties["35-44"].sum())
fig = county_choropleth(
    counties,
    "35-44",
    title="Population aged 35-44 by county, 1980 (modelled)",
    cmap="viridis",
    norm="log",
    legend_label="people aged 35-44 (modelled, log scale)",
)
save_figure(fig, *snakemake.output)  # noqa: F821
