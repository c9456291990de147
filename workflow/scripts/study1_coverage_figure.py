"""Study 1's coverage figure: coverage against epsilon, the nominal level drawn."""

import pandas as pd

from dpcounts.fast_exit import fast_exit
from dpcounts.io import save_figure
from dpcounts.plots.study1 import figure_coverage

save_figure(figure_coverage(pd.read_parquet(snakemake.input[0])), *snakemake.output)
fast_exit()  # outputs written: skip the interpreter's teardown
