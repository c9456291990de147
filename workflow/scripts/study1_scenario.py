"""One Study-1 scenario: populations, true rates and the public county attributes."""

import logging

import pandas as pd

from dpcounts.data.age_groups import group_population, load_age_groups
from dpcounts.data.counties import load_county_table
from dpcounts.fast_exit import fast_exit
from dpcounts.io import write_parquet
from dpcounts.studies.study1 import scenario_frame

logging.basicConfig(filename=snakemake.log[0], level=logging.INFO, force=True)
counties = load_county_table(snakemake.input.counties)  # no geometry needed
over_35 = group_population(load_age_groups(snakemake.input.age_groups), "35+", counties["fips"])
frame = scenario_frame(
    int(snakemake.wildcards.scenario),
    counties,
    pd.read_parquet(snakemake.input.truth),
    over_35,
    snakemake.params.urban_threshold,
)
logging.info(
    "scenario %s: %d counties, y. = %d", frame["scenario"][0], len(frame), frame["total"][0]
)
write_parquet(frame, snakemake.output[0])
fast_exit()  # outputs written: skip the interpreter's teardown
