"""Gather every data set's fits: records, summary, checks, posterior of mu, utility."""

import json
import logging

import pandas as pd

from dpsynth.io import write_json, write_parquet
from dpsynth.pseudo_posterior.tables import study_checks, summary_table

logging.basicConfig(filename=snakemake.log[0], level=logging.INFO, force=True)
inputs = snakemake.input
tables = {key: [] for key in ("records", "summary", "posterior", "utility", "synthetic")}
checks = {}
for i, dataset in enumerate(snakemake.params.datasets):
    records = pd.read_parquet(inputs.records[i])
    draws = pd.read_parquet(inputs.draws[i])
    utility = pd.read_parquet(inputs.utility[i])
    metadata = json.loads(open(inputs.fits[i]).read())
    summary = summary_table(records, draws, metadata, utility)
    checks[dataset] = study_checks(summary, snakemake.params.tolerance)
    for check in checks[dataset]:
        logging.info(
            "%s %s: %.4g (%s)",
            dataset,
            check["check"],
            check["value"],
            "holds" if check["passed"] else "DOES NOT HOLD",
        )
    columns = ["synthesizer", "record", "weight", "lipschitz"]
    tables["records"].append(records[columns].assign(dataset=dataset))
    tables["summary"].append(summary.assign(dataset=dataset))
    tables["posterior"].append(draws[["synthesizer", "draw", "mu"]].assign(dataset=dataset))
    tables["utility"].append(utility.assign(dataset=dataset))
    tables["synthetic"].append(pd.read_parquet(inputs.synthetic[i]).assign(dataset=dataset))

for key, frames in tables.items():
    frame = pd.concat(frames, ignore_index=True)
    frame = frame[["dataset", *[c for c in frame.columns if c != "dataset"]]]
    write_parquet(frame, snakemake.output[key])
write_json(checks, snakemake.output.checks)
