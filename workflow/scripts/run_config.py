"""The run's configuration (config files and --config, after schema defaults), keys sorted."""

import logging

from dpcounts.fast_exit import fast_exit
from dpcounts.io import write_yaml

logging.basicConfig(filename=snakemake.log[0], level=logging.INFO, force=True)
write_yaml(
    dict(snakemake.params.config),
    snakemake.output[0],
    header="The configuration of this dpcounts run, after the schema's defaults were filled in\n"
    "(job_structure, which changes no artifact, is left out).\n"
    f"The code that ran it: {snakemake.params.code}.\n"
    "Rerun it with: snakemake --configfile <this file>",
)
fast_exit()  # outputs written: skip the interpreter's teardown
