"""The L datasets of one Study-1 scenario, y ~ Mult(y., n lambda / sum n lambda)."""

import logging

import numpy as np
import pandas as pd

from dpsynth.data.scenarios import draw_datasets
from dpsynth.io import write_parquet
from dpsynth.seeding import job_rng
from dpsynth.study1 import load_scenario

logging.basicConfig(filename=snakemake.log[0], level=logging.INFO, force=True)
scenario, _ = load_scenario(snakemake.input[0])
# 35-44 keeps its historical key; an Appendix C age group adds ("appendix_c", <age group>).
labels = snakemake.params.rng_labels
rng = job_rng(snakemake.params.seed, "study1", *labels, "datasets", scenario.number)
y = draw_datasets(scenario, snakemake.params.datasets, rng)
n_sets, n_cells = y.shape
frame = pd.DataFrame(
    {
        "dataset": np.repeat(np.arange(n_sets), n_cells),
        "county": np.tile(np.arange(n_cells), n_sets),
        "count": y.ravel(),
    }
)
logging.info("scenario %s: %d datasets of %d counties", scenario.number, n_sets, n_cells)
write_parquet(frame, snakemake.output[0])
