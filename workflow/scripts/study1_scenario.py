"""One Study-1 scenario: populations, true rates and the public county attributes."""

import logging

import pandas as pd

from dpsynth.data.age_groups import group_population, load_age_groups
from dpsynth.data.counties import load_counties
from dpsynth.data.scenarios import make_scenario
from dpsynth.io import write_parquet

logging.basicConfig(filename=snakemake.log[0], level=logging.INFO, force=True)
counties = load_counties(snakemake.input.counties)
truth = pd.read_parquet(snakemake.input.truth).set_index("fips").loc[counties["fips"]]
ages = load_age_groups(snakemake.input.age_groups)
over_35 = group_population(ages, "35+", counties["fips"])

total = int(round(truth["expected"].sum()))
scenario = make_scenario(
    int(snakemake.wildcards.scenario), truth["population"], truth["rate"], total
)
frame = pd.DataFrame(
    {
        "scenario": scenario.number,
        "fips": counties["fips"].to_numpy(),
        "state": counties["state"].to_numpy(),
        "urban": over_35.to_numpy() > snakemake.params.urban_threshold,
        "population": scenario.population,
        "rate": scenario.rate,
        "total": total,
    }
)
logging.info("scenario %s: %d counties, y. = %d", scenario.number, len(frame), total)
write_parquet(frame, snakemake.output[0])
