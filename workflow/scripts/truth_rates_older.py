"""True county rates of the older age groups (Study 1's Appendix C): totals and
populations modelled, each map related to the 35-44 truth (see dpcounts.data.truth.build).

One process for every configured group: the CAR field's factor is computed once
(dpcounts.data.truth.model.car_factor), and each group draws from its own generator
(job_rng(seed, "truth", age group)), so each group's files are those it has alone."""

import logging

import pandas as pd

from dpcounts.data.age_groups import load_age_groups
from dpcounts.data.counties import load_county_table, load_queen_edges
from dpcounts.data.truth.build import build_older_truth
from dpcounts.fast_exit import fast_exit
from dpcounts.io import write_json, write_parquet
from dpcounts.seeding import job_rng

logging.basicConfig(filename=snakemake.log[0], level=logging.INFO, force=True)
p = snakemake.params
out = snakemake.output
counties = load_county_table(snakemake.input.counties)
edges = load_queen_edges(snakemake.input.edges)
ages = load_age_groups(snakemake.input.age_groups)
reference = pd.read_parquet(snakemake.input.reference)
for age_group, truth_path, summary_path in zip(p.age_groups, out.truth, out.summary, strict=True):
    truth, summary = build_older_truth(
        counties,
        edges,
        ages,
        reference,
        p.truth,
        age_group,
        p.rates_per_100k[age_group],
        p.correlation,
        job_rng(p.seed, "truth", age_group),
    )
    write_parquet(truth, truth_path)
    write_json(summary, summary_path)
fast_exit()  # outputs written: skip the interpreter's teardown
