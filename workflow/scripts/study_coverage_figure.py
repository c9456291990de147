"""A study's coverage figure: coverage against epsilon, the nominal level drawn."""

import json
from pathlib import Path

import pandas as pd

from dpcounts.fast_exit import fast_exit
from dpcounts.io import save_figure
from dpcounts.plots.study import figure_coverage
from dpcounts.studies.stage.definition import study_definition

d = study_definition(snakemake.wildcards.study, snakemake.params.entry)
table = pd.read_parquet(snakemake.input.coverage)
spent = json.loads(Path(snakemake.input.prior).read_text())["epsilon_prior"]
save_figure(figure_coverage(table, d.arms, d.title, spent), *snakemake.output)
fast_exit()  # outputs written: skip the interpreter's teardown
