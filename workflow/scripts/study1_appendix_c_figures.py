"""Study 1's Appendix C figures: rMSE and scenario-4 group rates per older age group."""

import pandas as pd

from dpcounts.fast_exit import fast_exit
from dpcounts.io import save_figure
from dpcounts.plots.study1 import figure_appendix_disparities, figure_appendix_rmse

summary = pd.read_parquet(snakemake.input[0])
correlation = snakemake.params.correlation
save_figure(figure_appendix_rmse(summary, correlation=correlation), *snakemake.output.rmse)
save_figure(
    figure_appendix_disparities(summary, correlation=correlation),
    *snakemake.output.disparities,
)
fast_exit()  # outputs written: skip the interpreter's teardown
