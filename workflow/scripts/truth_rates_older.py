"""True county rates of an older age group (Study 1's Appendix C): totals and populations
modelled, the map related to the 35-44 truth (see dpsynth.data.truth.model.model_truth_related)."""

import logging
from dataclasses import replace

import pandas as pd

from dpsynth.data.age_groups import group_population, load_age_groups
from dpsynth.data.counties import load_counties, load_queen_edges, queen_adjacency
from dpsynth.data.truth.model import TruthModel, model_truth_related, modelled_total
from dpsynth.data.truth.summary import truth_summary
from dpsynth.io import write_json, write_parquet
from dpsynth.seeding import job_rng
from dpsynth.units import PER_100K

logging.basicConfig(filename=snakemake.log[0], level=logging.INFO, force=True)
p = snakemake.params
counties = load_counties(snakemake.input.counties)
edges = load_queen_edges(snakemake.input.edges)
ages = load_age_groups(snakemake.input.age_groups)
population = group_population(ages, p.age_group, counties["fips"])
total = modelled_total(p.rate_per_100k, population)
params = replace(TruthModel.from_config(p.truth["model"]), total_deaths=float(total))
reference = pd.read_parquet(snakemake.input.reference)
rng = job_rng(p.seed, "truth", p.age_group)
truth = model_truth_related(counties, edges, population, reference, params, p.correlation, rng)
truth["rate_per_100k"] = truth["rate"] * PER_100K
logging.info("%s: modelled total %d deaths with %s", p.age_group, total, params)

summary = {
    "source": "model",
    "age_group": p.age_group,
    "modelled_total_deaths": total,
    "national_rate_per_100k_assumed": p.rate_per_100k,
    "correlation_with_35_44": p.correlation,
    "reference_source": p.truth["source"],
}
summary.update(truth_summary(truth, queen_adjacency(edges, truth["fips"])))
logging.info("summary: %s", summary)
write_parquet(truth, snakemake.output.truth)
write_json(summary, snakemake.output.summary)
