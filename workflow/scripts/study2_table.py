"""The input table of a Study 2 study (pennLC, or the stand-in drawn from it)."""

import logging

from dpcounts.data.pennsylvania import load_pennlc, load_pennsylvania_counties
from dpcounts.data.standard_population import load_standard_population
from dpcounts.fast_exit import fast_exit
from dpcounts.io import write_parquet
from dpcounts.seeding import job_rng
from dpcounts.studies.study2.tables import study_table

logging.basicConfig(filename=snakemake.log[0], level=logging.INFO, force=True)
study = snakemake.wildcards.study
table = study_table(
    study,
    load_pennlc(snakemake.input.pennlc),
    load_pennsylvania_counties(snakemake.input.counties),
    load_standard_population(snakemake.input.standard_population),
    job_rng(snakemake.params.seed, "study2", study, "standin"),
    standin_total=snakemake.params.standin_total,
)
logging.info("%s: %d strata, %d urban counties", study, len(table),
             table.drop_duplicates("county")["urban"].sum())  # fmt: skip
write_parquet(table, snakemake.output[0])
fast_exit()  # outputs written: skip the interpreter's teardown
