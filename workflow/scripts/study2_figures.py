"""Figures 2-6 and the distribution of a for one Study-2 scenario (a configured study)."""

import logging

import pandas as pd

from dpsynth.data.pennsylvania import load_pennsylvania_counties
from dpsynth.io import save_figure
from dpsynth.plots.study2 import (
    disparity_title,
    figure_county_rates,
    figure_disparities,
    figure_maps,
    figure_prior,
    figure_shapes,
    prior_label,
)
from dpsynth.study.definition import study_definition

logging.basicConfig(filename=snakemake.log[0], level=logging.INFO, force=True)
p, out = snakemake.params, snakemake.output
d = study_definition(snakemake.wildcards.scenario, p.entry)
strata = pd.read_parquet(snakemake.input.strata)
summary = pd.read_parquet(snakemake.input.summary)
area_rates = pd.read_parquet(snakemake.input.area_rates)
label = prior_label(d.prior)
groups = d.prior.by or tuple(k for k in d.keys if k != d.area)
disparities = {spec.name: spec for spec in d.disparities}

save_figure(figure_prior(strata, groups, d.name, label), *out.figure2_prior)
save_figure(figure_county_rates(area_rates, d.map_epsilons, p.primary, d.name),
            *out.figure3_county_rates)  # fmt: skip
counties = load_pennsylvania_counties(snakemake.input.map)
save_figure(figure_maps(counties, area_rates, d.map_epsilons[0], p.primary, d.name),
            *out.figure4_maps)  # fmt: skip
for stem, names, heading in (
    ("figure5_disparities", p.figure5, "Disparities in synthetic data"),
    ("figure6_subgroups", p.figure6, "Subgroup disparities in synthetic data"),
):
    titles = [f"({chr(97 + k)}) {disparity_title(disparities[n])}" for k, n in enumerate(names)]
    metrics = [f"disparity:{n}" for n in names]
    save_figure(figure_disparities(summary, metrics, titles, p.primary, d.name, label, heading),
                *out[stem])  # fmt: skip
save_figure(figure_shapes(summary, int(strata[d.count].sum()), d.name), *out.shapes)
