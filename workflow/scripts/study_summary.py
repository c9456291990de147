"""A study's summary, map rates and epsilon guide, from its cached chunks."""

import logging

import pandas as pd

from dpsynth.io import atomic_path, write_parquet
from dpsynth.study.definition import study_definition
from dpsynth.study.guide import epsilon_guide
from dpsynth.study.measures import study_measures
from dpsynth.study.summary import area_rates, summarise_study

logging.basicConfig(filename=snakemake.log[0], level=logging.INFO, force=True)
d = study_definition(snakemake.wildcards.study, snakemake.params.entry)
strata = pd.read_parquet(snakemake.input.strata)
standard = None
if d.age is not None:
    from dpsynth.data.standard_population import load_standard_population

    standard = load_standard_population(snakemake.input.standard_population)
measures = study_measures(d, strata, standard)


def read_all(paths):
    frames = [frame for frame in map(pd.read_parquet, paths) if len(frame)]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


summary = summarise_study(
    d,
    strata,
    measures,
    metrics=read_all(snakemake.input.metrics),
    calibrations=read_all(snakemake.input.calibrations),
    status=read_all(snakemake.input.status),
)
overall = strata[d.count].sum() / strata[d.population].sum() * 1e5
guide = epsilon_guide(summary, overall, d.tolerance, d.band_tolerance)
guide.insert(0, "study", d.name)
logging.info("guide:\n%s", guide.to_string())
write_parquet(summary, snakemake.output.summary)
write_parquet(
    area_rates(d, strata, measures, read_all(snakemake.input.area_sums)),
    snakemake.output.area_rates,
)
with atomic_path(snakemake.output.guide) as tmp:
    guide.to_csv(tmp, index=False, lineterminator="\n", float_format="%.6g")
