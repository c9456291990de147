"""A study's strata, checked and sorted, with their prior rates (and what those cost), and
the report of what was read and done to the table (a warning in the log for each change
to a count)."""

import logging

from dpcounts.fast_exit import fast_exit
from dpcounts.io import write_json, write_parquet
from dpcounts.seeding import job_rng
from dpcounts.studies.stage.definition import study_definition
from dpcounts.studies.stage.prior import prior_rates
from dpcounts.studies.stage.table import read_study_table

logging.basicConfig(filename=snakemake.log[0], level=logging.INFO, force=True)
name = snakemake.wildcards.study
definition = study_definition(name, snakemake.params.entry)
strata, report = read_study_table(definition)
for warning in report["warnings"]:
    logging.warning(warning)
rates, spent = prior_rates(
    definition, strata, job_rng(snakemake.params.seed, *definition.stream, "prior")
)
strata["prior_rate"] = rates
logging.info("%d strata, y. = %d, prior %s (spent %g)", len(strata),
             strata[definition.count].sum(), definition.prior.source, spent)  # fmt: skip
write_parquet(strata, snakemake.output.strata)
write_json(report, snakemake.output.table)
write_json({"source": definition.prior.source, "epsilon_prior": spent}, snakemake.output.prior)
fast_exit()  # outputs written: skip the interpreter's teardown
