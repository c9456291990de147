"""The L datasets of one Study-1 scenario, y ~ Mult(y., n lambda / sum n lambda)."""

import logging

from dpcounts.fast_exit import fast_exit
from dpcounts.io import write_parquet
from dpcounts.studies.study1 import Study1Design, datasets_frame, load_scenario, run_rng

logging.basicConfig(filename=snakemake.log[0], level=logging.INFO, force=True)
p = snakemake.params
scenario, _ = load_scenario(snakemake.input[0])
rng = run_rng(p.seed, p.rng_labels, "datasets", scenario.number)
frame = datasets_frame(scenario, Study1Design.from_config(p.design).datasets, rng)
logging.info("scenario %s: %d rows (dataset x county)", scenario.number, len(frame))
write_parquet(frame, snakemake.output[0])
fast_exit()  # outputs written: skip the interpreter's teardown
