"""True county rates of an older age group (Study 1's Appendix C): totals and populations
modelled, the map related to the 35-44 truth (see dpsynth.data.truth.build)."""

import logging

import pandas as pd

from dpsynth.data.age_groups import load_age_groups
from dpsynth.data.counties import load_county_table, load_queen_edges
from dpsynth.data.truth.build import build_older_truth
from dpsynth.io import write_json, write_parquet
from dpsynth.seeding import job_rng

logging.basicConfig(filename=snakemake.log[0], level=logging.INFO, force=True)
p = snakemake.params
truth, summary = build_older_truth(
    load_county_table(snakemake.input.counties),
    load_queen_edges(snakemake.input.edges),
    load_age_groups(snakemake.input.age_groups),
    pd.read_parquet(snakemake.input.reference),
    p.truth,
    p.age_group,
    p.rate_per_100k,
    p.correlation,
    job_rng(p.seed, "truth", p.age_group),
)
write_parquet(truth, snakemake.output.truth)
write_json(summary, snakemake.output.summary)
