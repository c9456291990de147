"""A study's attack figure: what an attacker recovers of the small true counts from the DP
arms' tables, against differencing on the suppressed table (issue #53)."""

import json
from pathlib import Path

import pandas as pd

from dpcounts.fast_exit import fast_exit
from dpcounts.io import save_figure
from dpcounts.plots.study import figure_attack
from dpcounts.studies.stage.definition import study_definition

d = study_definition(snakemake.wildcards.study, snakemake.params.entry)
summary = pd.read_parquet(snakemake.input.summary)
result = json.loads(Path(snakemake.input.suppression).read_text())
save_figure(figure_attack(summary, result, d.arms, d.title), *snakemake.output)
fast_exit()  # outputs written: skip the interpreter's teardown
