"""Study 2's released strata of one scenario, with their prior rates and urban flags."""

import logging

import numpy as np

from dpsynth.data.pennsylvania import load_pennlc, load_pennsylvania_counties
from dpsynth.data.pennsylvania_standin import StandinModel, standin_strata
from dpsynth.data.standard_population import load_standard_population
from dpsynth.io import write_parquet
from dpsynth.seeding import job_rng
from dpsynth.study2 import PRIOR_KEYS, county_urban, prior_rates, release_strata

logging.basicConfig(filename=snakemake.log[0], level=logging.INFO, force=True)
p, scenario = snakemake.params, snakemake.wildcards.scenario
pennlc = load_pennlc(snakemake.input.pennlc)
counties = load_pennsylvania_counties(snakemake.input.counties)
if scenario == "standin":
    urban = county_urban(pennlc, counties).set_index("county")["urban"]
    model = StandinModel(total=p.standin_total)
    strata = standin_strata(
        pennlc,
        load_standard_population(snakemake.input.standard_population),
        urban,
        job_rng(p.seed, "study2", scenario, "standin"),
        model,
    )
else:
    strata = pennlc
strata, n_empty = release_strata(strata)
logging.info("%s: %d strata released, %d empty strata left out", scenario, len(strata), n_empty)
rng = job_rng(p.seed, "study2", scenario, "prior")
strata["prior_rate"] = prior_rates(strata, PRIOR_KEYS[scenario], p.prior_mode, rng, p.prior_epsilon)
strata["expected"] = strata["population"] * strata["prior_rate"]
logging.info(
    "prior mode %s: expected total %.1f vs y. = %d",
    p.prior_mode,
    strata["expected"].sum(),
    strata["cases"].sum(),
)
urban = county_urban(strata, counties)
logging.info("%d urban counties of %d", int(np.sum(urban["urban"])), len(urban))
write_parquet(strata, snakemake.output.strata)
write_parquet(urban, snakemake.output.counties)
