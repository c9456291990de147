"""Figure 1 of Study 2: Quick (2022)'s toy example (two groups, y. = 100, eps = 1)."""

import logging

from dpcounts.fast_exit import fast_exit
from dpcounts.io import save_figure
from dpcounts.plots.study2 import figure_toy
from dpcounts.studies.stage.definition import config_arms

logging.basicConfig(filename=snakemake.log[0], level=logging.INFO, force=True)
toy, arms = snakemake.params.toy, config_arms("study2.arms", snakemake.params.arms)
fig = figure_toy(toy["total"], toy["expected"], toy["epsilon"], toy["true_y1"], toy["tail"], arms)
save_figure(fig, *snakemake.output)
fast_exit()  # outputs written: skip the interpreter's teardown
