"""Study 1's Figures 1 (rMSE) and 2 (urban/rural, New Mexico/New York)."""

import pandas as pd

from dpcounts.fast_exit import fast_exit
from dpcounts.io import save_figure
from dpcounts.plots.study1 import figure_disparities, figure_rmse

summary = pd.read_parquet(snakemake.input[0])
save_figure(figure_rmse(summary), *snakemake.output.rmse)
save_figure(figure_disparities(summary), *snakemake.output.disparities)
fast_exit()  # outputs written: skip the interpreter's teardown
