"""A study's summary, map rates and epsilon guide (with its coverage rows where the study
measures coverage), from its cached chunks, and the guide's fingerprint (``guide.json``:
what it judged, checked by ``dpcounts synthesize --study``)."""

import json
import logging
from pathlib import Path

import pandas as pd

from dpcounts.fast_exit import fast_exit
from dpcounts.io import atomic_path, write_parquet
from dpcounts.studies.stage.coverage import coverage_guide, with_coverage
from dpcounts.studies.stage.definition import study_definition
from dpcounts.studies.stage.fingerprint import write_fingerprint
from dpcounts.studies.stage.guide import study_guide
from dpcounts.studies.stage.measures import study_measures
from dpcounts.studies.stage.summary import area_rates, summarise_study

logging.basicConfig(filename=snakemake.log[0], level=logging.INFO, force=True)
d = study_definition(snakemake.wildcards.study, snakemake.params.entry)
strata = pd.read_parquet(snakemake.input.strata)
measures = study_measures(d, strata)


def read_all(paths):
    frames = [frame for frame in map(pd.read_parquet, paths) if len(frame)]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


calibrations = read_all(snakemake.input.calibrations)
summary = summarise_study(
    d,
    strata,
    measures,
    metrics=read_all(snakemake.input.metrics),
    calibrations=calibrations,
    status=read_all(snakemake.input.status),
    reference=pd.read_parquet(snakemake.input.reference).drop(columns="set"),
)
logging.info("%s: %d summary rows", d.name, len(summary))
write_parquet(summary, snakemake.output.summary)
sums = read_all(snakemake.input.area_sums)
write_parquet(area_rates(d, strata, measures, sums), snakemake.output.area_rates)
with atomic_path(snakemake.output.guide) as tmp:
    spent = json.loads(Path(snakemake.input.prior).read_text())["epsilon_prior"]
    suppression = (
        json.loads(Path(snakemake.input.suppression[0]).read_text())
        if snakemake.input.suppression
        else None
    )
    guide = study_guide(d, strata, summary, spent, calibrations, suppression)
    if snakemake.input.coverage:
        coverage = pd.read_parquet(snakemake.input.coverage[0])
        guide = with_coverage(guide, coverage_guide(coverage, d, spent), spent)
    guide.to_csv(tmp, index=False, lineterminator="\n", float_format="%.6g")
write_fingerprint(d, snakemake.output.fingerprint)
fast_exit()  # outputs written: skip the interpreter's teardown
