"""A study's figures: its measures against epsilon and the epsilon guide."""

import pandas as pd

from dpsynth.io import save_figure
from dpsynth.plots.study import figure_guide, figure_measures
from dpsynth.study.definition import study_definition

d = study_definition(snakemake.wildcards.study, snakemake.params.entry)
summary = pd.read_parquet(snakemake.input.summary)
save_figure(figure_measures(summary, d.name, d.age is not None), *snakemake.output.measures)
guide = pd.read_csv(snakemake.input.guide)
save_figure(figure_guide(guide, d.epsilons, d.name, d.arms), *snakemake.output.guide)
