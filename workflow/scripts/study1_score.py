"""Score one arm on one chunk of datasets and epsilons of one Study-1 scenario."""

import logging

from dpcounts.fast_exit import fast_exit
from dpcounts.io import write_parquet
from dpcounts.studies.study1 import Study1Design, run_rng, score_chunk

logging.basicConfig(filename=snakemake.log[0], level=logging.INFO, force=True)
p, w = snakemake.params, snakemake.wildcards
unit = ("score", int(w.scenario), w.arm, w.chunk)
scores, county_sums = score_chunk(
    snakemake.input.scenario,
    snakemake.input.datasets,
    w.arm,
    w.chunk,
    Study1Design.from_config(p.design),
    run_rng(p.seed, p.rng_labels, *unit),
)
logging.info("%s %s: %d score rows", w.arm, w.chunk, len(scores))
write_parquet(scores, snakemake.output.scores)
write_parquet(county_sums, snakemake.output.county_sums)
fast_exit()  # outputs written: skip the interpreter's teardown
