"""Score one mechanism on one chunk of datasets and epsilons of one Study-1 scenario."""

import logging

import pandas as pd

from dpsynth.design import chunk_members
from dpsynth.io import write_parquet
from dpsynth.seeding import job_rng
from dpsynth.study1 import load_datasets, load_scenario, score_datasets

logging.basicConfig(filename=snakemake.log[0], level=logging.INFO, force=True)
p, w = snakemake.params, snakemake.wildcards
scenario, geo = load_scenario(snakemake.input.scenario)
epsilons, ids = chunk_members(
    w.chunk, p.epsilons, p.epsilons_per_job, p.datasets, p.datasets_per_job
)
datasets = load_datasets(snakemake.input.datasets, ids)
# 35-44 keeps its historical key; an Appendix C age group adds ("appendix_c", <age group>).
rng = job_rng(p.seed, "study1", *p.rng_labels, "score", scenario.number, w.mechanism, w.chunk)
scores, county_sums = score_datasets(
    scenario,
    geo,
    datasets,
    ids,
    w.mechanism,
    epsilons,
    rng,
    prior_budget_fraction=p.prior_budget_fraction,
    map_epsilons=p.map_epsilons,
)
for frame in (scores, county_sums):
    frame.insert(0, "mechanism", w.mechanism)
    frame.insert(0, "scenario", scenario.number)
logging.info("%s: %d score rows", w.mechanism, len(scores))
write_parquet(scores, snakemake.output.scores)
write_parquet(pd.DataFrame(county_sums), snakemake.output.county_sums)
