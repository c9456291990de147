"""A study's coverage measure (issue #54, item 2): per arm, epsilon and method, the share
of the areas' intervals from a release's sets that hold the confidential rate, and the
guide's coverage rows in words (``coverage.csv``)."""

import json
import logging
from pathlib import Path

import pandas as pd

from dpcounts.fast_exit import fast_exit
from dpcounts.io import atomic_path, write_parquet
from dpcounts.studies.stage.coverage import coverage_guide, coverage_table
from dpcounts.studies.stage.definition import study_definition

logging.basicConfig(filename=snakemake.log[0], level=logging.INFO, force=True)
d = study_definition(snakemake.wildcards.study, snakemake.params.entry)
strata = pd.read_parquet(snakemake.input.strata)
frames = [f for f in map(pd.read_parquet, snakemake.input.calibrations) if len(f)]
calibrations = pd.concat(frames, ignore_index=True)
table = coverage_table(d, strata, calibrations, snakemake.params.seed)
write_parquet(table, snakemake.output.coverage)
spent = json.loads(Path(snakemake.input.prior).read_text())["epsilon_prior"]
with atomic_path(snakemake.output.guide) as tmp:
    guide = coverage_guide(table, d, spent)
    guide.to_csv(tmp, index=False, lineterminator="\n", float_format="%.6g")
fast_exit()  # outputs written: skip the interpreter's teardown
