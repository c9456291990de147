"""Fit the six synthesizers of one data set (Hu et al. (2020)), each after the fits it needs.

Poisson fits are exact conjugate draws (no JAX); negative binomial fits run NUTS on one
thread (the job holds one core), whose sampler is compiled once per job, and JAX's
persistent compilation cache in .snakemake/jax_cache/one_thread lets later jobs and reruns load that
compiled program instead (the environment variable JAX_COMPILATION_CACHE_DIR, if set,
takes precedence).
"""

import logging
import os

from dpcounts.fast_exit import fast_exit

# One XLA thread: the job holds one of Snakemake's cores. Set before JAX is imported.
os.environ.setdefault(
    "XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
)
# Compiled NUTS programs are kept across jobs. Entries are keyed by the program, the jaxlib
# version and the XLA flags above; XLA:CPU checks an entry's CPU features when loading it
# and recompiles if this machine lacks them (mixed cluster nodes). The key does not hold
# the compute pool's size, which changes the program's numbers: the folder is that of
# programs compiled for one thread (use_one_thread below), not of earlier versions'.
os.environ.setdefault(
    "JAX_COMPILATION_CACHE_DIR", os.path.abspath(".snakemake/jax_cache/one_thread")
)

import pandas as pd

from dpcounts.io import write_json, write_parquet
from dpcounts.seeding import job_rng
from dpcounts.studies.pseudo_posterior.fitting import fit_method
from dpcounts.studies.pseudo_posterior.study import StudySettings, fit_synthesizers
from dpcounts.studies.pseudo_posterior.tables import draws_table, fit_metadata, records_table

logging.basicConfig(filename=snakemake.log[0], level=logging.INFO, force=True)
dataset = snakemake.wildcards.dataset
settings = StudySettings.from_config(snakemake.params.section, dataset)
if fit_method(settings.family, settings.method) == "nuts":
    from dpcounts.studies.pseudo_posterior.jax_threads import use_one_thread

    use_one_thread()  # the job holds one core: JAX computes on one thread
fits = fit_synthesizers(
    pd.read_parquet(snakemake.input.data).sort_values("record")["y"].to_numpy(),
    settings,
    job_rng(snakemake.params.seed, "pseudo_posterior", dataset, "fit"),
)
write_parquet(draws_table(fits), snakemake.output.draws)
write_parquet(records_table(fits), snakemake.output.records)
write_json(fit_metadata(fits), snakemake.output.fits)
fast_exit()  # outputs written: skip the interpreter's teardown
