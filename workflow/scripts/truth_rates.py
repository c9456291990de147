"""Study 1's true county rates, ages 35-44 (modelled, or smoothed from a WONDER export)."""

import logging

from dpsynth.data import read_wonder
from dpsynth.data.age_groups import group_population, load_age_groups
from dpsynth.data.counties import load_counties, load_queen_edges, queen_adjacency
from dpsynth.data.truth.model import TruthModel, model_truth
from dpsynth.data.truth.observed import truth_from_wonder
from dpsynth.data.truth.summary import truth_summary
from dpsynth.io import write_json, write_parquet
from dpsynth.seeding import job_rng
from dpsynth.units import PER_100K

logging.basicConfig(filename=snakemake.log[0], level=logging.INFO, force=True)
settings = snakemake.params.truth
age_group = snakemake.params.age_group
counties = load_counties(snakemake.input.counties)
edges = load_queen_edges(snakemake.input.edges)

if settings["source"] == "model":
    ages = load_age_groups(snakemake.input.age_groups)
    population = group_population(ages, age_group)
    params = TruthModel.from_config(settings["model"])
    rng = job_rng(snakemake.params.seed, "truth", age_group)
    truth = model_truth(counties, edges, population, params, rng)
    logging.info("modelled truth with %s", params)
else:
    path = snakemake.input.wonder[0]
    truth = truth_from_wonder(
        read_wonder(path),
        counties,
        age_group_code=settings["wonder"]["age_group_code"],
        prior=settings["wonder"]["prior"],
        source=str(path),
    )
    logging.info("smoothed observed rates from %s", path)

truth["rate_per_100k"] = truth["rate"] * PER_100K
adjacency = queen_adjacency(edges, truth["fips"])
summary = {"source": settings["source"], "age_group": age_group}
summary.update(truth_summary(truth, adjacency))
logging.info("summary: %s", summary)
write_parquet(truth, snakemake.output.truth)
write_json(summary, snakemake.output.summary)
