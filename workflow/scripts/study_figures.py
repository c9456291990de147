"""A study's figures: its measures against epsilon and the epsilon guide."""

import json
from pathlib import Path

import pandas as pd

from dpcounts.fast_exit import fast_exit
from dpcounts.io import save_figure
from dpcounts.plots.study import figure_guide, figure_measures
from dpcounts.studies.stage.definition import study_definition
from dpcounts.studies.stage.measures import study_measure_list
from dpcounts.studies.stage.suppression import headline

d = study_definition(snakemake.wildcards.study, snakemake.params.entry)
summary = pd.read_parquet(snakemake.input.summary)
guide = pd.read_csv(snakemake.input.guide)
measures = study_measure_list(d)
# the guide's comparison with suppression, where the study has a suppression arm
lines = []
if snakemake.input.suppression:
    result = json.loads(Path(snakemake.input.suppression[0]).read_text())
    lines = headline(guide, result, measures)
figure = figure_measures(summary, guide, measures, d.arms, d.title, d.age is not None, lines)
save_figure(figure, *snakemake.output.measures)
save_figure(figure_guide(guide, measures, d.arms, d.epsilons, d.title), *snakemake.output.guide)
fast_exit()  # outputs written: skip the interpreter's teardown
