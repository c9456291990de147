"""Gather every data set's fits: records, summary, checks, posterior of mu, utility."""

import json
import logging

import pandas as pd

from dpcounts.fast_exit import fast_exit
from dpcounts.io import write_json, write_parquet
from dpcounts.studies.pseudo_posterior.tables import DatasetTables, gather_datasets

logging.basicConfig(filename=snakemake.log[0], level=logging.INFO, force=True)
inputs = snakemake.input
datasets = {
    dataset: DatasetTables(
        records=pd.read_parquet(inputs.records[i]),
        draws=pd.read_parquet(inputs.draws[i]),
        metadata=json.loads(open(inputs.fits[i]).read()),
        utility=pd.read_parquet(inputs.utility[i]),
        synthetic=pd.read_parquet(inputs.synthetic[i]),
    )
    for i, dataset in enumerate(snakemake.params.datasets)
}
tables, checks = gather_datasets(datasets, snakemake.params.tolerance)
for key, frame in tables.items():
    write_parquet(frame, snakemake.output[key])
write_json(checks, snakemake.output.checks)
fast_exit()  # outputs written: skip the interpreter's teardown
