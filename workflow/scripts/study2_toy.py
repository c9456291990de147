"""Figure 1 of Study 2: Quick (2022)'s toy example (two groups, y. = 100, eps = 1)."""

import logging

from dpsynth.io import save_figure
from dpsynth.plots.study2 import figure_toy

logging.basicConfig(filename=snakemake.log[0], level=logging.INFO, force=True)
toy = snakemake.params.toy
fig = figure_toy(toy["total"], toy["expected"], toy["epsilon"], toy["true_y1"], toy["tail"])
save_figure(fig, *snakemake.output)
