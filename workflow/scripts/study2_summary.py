"""Aggregate one Study-2 scenario: medians and 95% bands, truth and prior references."""

import logging

import pandas as pd

from dpsynth.io import write_parquet
from dpsynth.study2 import load_study, summarise_scenario

logging.basicConfig(filename=snakemake.log[0], level=logging.INFO, force=True)
p = snakemake.params
strata, adjuster, ratios = load_study(
    snakemake.input.strata,
    snakemake.input.counties,
    snakemake.input.standard_population,
    p.race_comparison,
    p.subgroups,
)


def read_all(paths):
    frames = [pd.read_parquet(path) for path in paths]
    frames = [frame for frame in frames if len(frame)]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


summary, county_rates = summarise_scenario(
    snakemake.wildcards.scenario,
    strata,
    adjuster,
    ratios,
    metrics=read_all(snakemake.input.metrics),
    counties=read_all(snakemake.input.county_draws),
    calibrations=read_all(snakemake.input.calibrations),
    status=read_all(snakemake.input.status),
)
logging.info("summary: %d rows; county rates: %d rows", len(summary), len(county_rates))
write_parquet(summary, snakemake.output.summary)
write_parquet(county_rates, snakemake.output.county_rates)
