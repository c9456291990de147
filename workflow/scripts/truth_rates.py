"""Study 1's true county rates, ages 35-44 (modelled, or smoothed from a WONDER export)."""

import logging

from dpcounts.data import read_wonder
from dpcounts.data.age_groups import load_age_groups
from dpcounts.data.counties import load_county_table, load_queen_edges
from dpcounts.data.truth.build import build_truth
from dpcounts.fast_exit import fast_exit
from dpcounts.io import write_json, write_parquet
from dpcounts.seeding import job_rng

logging.basicConfig(filename=snakemake.log[0], level=logging.INFO, force=True)
age_group = snakemake.params.age_group
truth, summary = build_truth(
    load_county_table(snakemake.input.counties),
    load_queen_edges(snakemake.input.edges),
    load_age_groups(snakemake.input.age_groups),
    snakemake.params.truth,
    age_group,
    job_rng(snakemake.params.seed, "truth", age_group),
    wonder=read_wonder(snakemake.input.wonder[0]) if snakemake.input.wonder else None,
)
write_parquet(truth, snakemake.output.truth)
write_json(summary, snakemake.output.summary)
fast_exit()  # outputs written: skip the interpreter's teardown
