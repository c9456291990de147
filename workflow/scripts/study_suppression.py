"""A study's suppression arm: its rule applied to the true counts, the completed table's
measures and the differencing attack (issue #53), into ``suppression.json``."""

import logging
import time

import pandas as pd

from dpcounts.fast_exit import fast_exit
from dpcounts.io import write_json
from dpcounts.seeding import job_rng
from dpcounts.studies.stage.definition import study_definition
from dpcounts.studies.stage.measures import study_measures
from dpcounts.studies.stage.suppression import suppression_result

logging.basicConfig(filename=snakemake.log[0], level=logging.INFO, force=True)
d = study_definition(snakemake.wildcards.study, snakemake.params.entry)
strata = pd.read_parquet(snakemake.input.strata)
rng = job_rng(snakemake.params.seed, *d.stream, "suppression")
start = time.perf_counter()
result = suppression_result(d, strata, study_measures(d, strata), rng)
logging.info("%s: %d of %d counts suppressed; the suppression arm and its attack took %.1f s "
             "(%s LPs)", d.name, result["suppressed"], result["strata"],
             time.perf_counter() - start, result["attack"]["lps"])  # fmt: skip
write_json(result, snakemake.output[0])
fast_exit()  # outputs written: skip the interpreter's teardown
