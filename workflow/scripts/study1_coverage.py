"""Study 1's coverage (issue #54, item 2): per scenario, arm, epsilon and method, the share
of the counties' intervals from a release of each dataset that hold its confidential
rates, and the same in words (``coverage.csv``)."""

import logging

from dpcounts.fast_exit import fast_exit
from dpcounts.io import atomic_path, write_parquet
from dpcounts.studies.study1_coverage import Study1Coverage, coverage_guide, coverage_table

logging.basicConfig(filename=snakemake.log[0], level=logging.INFO, force=True)
p = snakemake.params
spec = Study1Coverage.from_config(p.study1)
table = coverage_table(snakemake.input.scenarios, snakemake.input.datasets, spec, p.seed)
write_parquet(table, snakemake.output.coverage)
with atomic_path(snakemake.output.guide) as tmp:
    guide = coverage_guide(table, spec)
    guide.to_csv(tmp, index=False, lineterminator="\n", float_format="%.6g")
fast_exit()  # outputs written: skip the interpreter's teardown
