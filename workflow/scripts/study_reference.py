"""Draw and measure a study's no-privacy reference: tables with the privacy term removed."""

import logging

import pandas as pd

from dpcounts.fast_exit import fast_exit
from dpcounts.io import write_parquet
from dpcounts.seeding import job_rng
from dpcounts.studies.stage.definition import study_definition
from dpcounts.studies.stage.simulate import reference_metrics

logging.basicConfig(filename=snakemake.log[0], level=logging.INFO, force=True)
definition = study_definition(snakemake.wildcards.study, snakemake.params.entry)
rng = job_rng(snakemake.params.seed, *definition.stream, "reference")
metrics = reference_metrics(definition, pd.read_parquet(snakemake.input.strata), rng)
logging.info("%s: %d tables of the no-privacy reference", definition.name, len(metrics))
write_parquet(metrics, snakemake.output.reference)
fast_exit()  # outputs written: skip the interpreter's teardown
