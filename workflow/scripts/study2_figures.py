"""Figures 2-6 and the distribution of a for one Study-2 scenario."""

import logging

import pandas as pd

from dpsynth.data.pennsylvania import load_pennsylvania_counties
from dpsynth.io import save_figure
from dpsynth.plots.study2 import (
    METRIC_TITLES,
    figure_county_rates,
    figure_disparities,
    figure_maps,
    figure_prior,
    figure_shapes,
)
from dpsynth.study2 import PRIOR_KEYS

logging.basicConfig(filename=snakemake.log[0], level=logging.INFO, force=True)
p, out = snakemake.params, snakemake.output
scenario = snakemake.wildcards.scenario
strata = pd.read_parquet(snakemake.input.strata)
summary = pd.read_parquet(snakemake.input.summary)
county_rates = pd.read_parquet(snakemake.input.county_rates)
prior_label = {
    "noisy": f"prior: noisy statewide rates (eps_prior = {p.prior['epsilon']:g})",
    "public": "prior: statewide rates (public)",
    "national": "prior: modelled national rates",
}[p.prior["mode"]]

save_figure(figure_prior(strata, PRIOR_KEYS[scenario], scenario, prior_label), *out.figure2_prior)
save_figure(
    figure_county_rates(county_rates, p.figure_epsilons, p.primary, scenario),
    *out.figure3_county_rates,
)
counties = load_pennsylvania_counties(snakemake.input.map)
save_figure(
    figure_maps(counties, county_rates, p.figure_epsilons[0], p.primary, scenario),
    *out.figure4_maps,
)
metrics = ["ratio_urban_rural", "ratio_race_female", "ratio_race_male"]
race = p.race_comparison
titles = [
    "(a) Urban / rural",
    f"(b) Race {race['numerator']} / {race['denominator']}, women",
    f"(c) Race {race['numerator']} / {race['denominator']}, men",
]
save_figure(
    figure_disparities(
        summary, metrics, titles, p.primary, scenario, prior_label, "Disparities in synthetic data"
    ),
    *out.figure5_disparities,
)
names = {spec["name"]: spec for spec in p.subgroups}
titles6 = []
for letter, name in zip("ab", p.figure6, strict=True):
    spec = names[name]
    where = ", ".join(f"{k} = {v}" for k, v in spec.get("where", {}).items())
    num = ", ".join(f"{k} = {v}" for k, v in spec["numerator"].items())
    den = ", ".join(f"{k} = {v}" for k, v in spec["denominator"].items())
    titles6.append(f"({letter}) {num} / {den}; {where}")
save_figure(
    figure_disparities(
        summary,
        [f"ratio_{n}" for n in p.figure6],
        titles6,
        p.primary,
        scenario,
        prior_label,
        "Subgroup disparities in synthetic data",
    ),
    *out.figure6_subgroups,
)
save_figure(figure_shapes(summary, int(strata["cases"].sum()), scenario), *out.shapes)
logging.info("figures of %s written (%s)", scenario, ", ".join(METRIC_TITLES))
