"""A study's figures: its measures against epsilon and the epsilon guide."""

import pandas as pd

from dpsynth.fast_exit import fast_exit
from dpsynth.io import save_figure
from dpsynth.plots.study import figure_guide, figure_measures
from dpsynth.studies.stage.definition import study_definition
from dpsynth.studies.stage.measures import study_measure_list

d = study_definition(snakemake.wildcards.study, snakemake.params.entry)
summary = pd.read_parquet(snakemake.input.summary)
guide = pd.read_csv(snakemake.input.guide)
measures = study_measure_list(d)
figure = figure_measures(summary, guide, measures, d.arms, d.title, d.age is not None)
save_figure(figure, *snakemake.output.measures)
save_figure(figure_guide(guide, measures, d.arms, d.epsilons, d.title), *snakemake.output.guide)
fast_exit()  # outputs written: skip the interpreter's teardown
