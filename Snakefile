# dpcounts: differentially private synthetic count data, end to end.
# Thin on purpose: config + validation, the rule files of each stage, and `all`.
import os
import sys

from snakemake.utils import min_version

from dpcounts.config_check import ConfigError, check_config

min_version("9.0")


configfile: "config/config.yaml"


try:
    check_config(config, f"{workflow.basedir}/workflow/schemas/config.schema.yaml")
except ConfigError as error:
    sys.exit(f"config error: {error}")


report: "workflow/report/workflow.rst"


# One BLAS/OpenMP thread per job, as each job declares (`threads: 1`), and figures drawn
# off screen, unless set outside.
for name, value in [
    ("OPENBLAS_NUM_THREADS", "1"),
    ("OMP_NUM_THREADS", "1"),
    ("MKL_NUM_THREADS", "1"),
    ("MPLBACKEND", "Agg"),
]:
    os.environ.setdefault(name, value)

# Jobs import dpcounts from this checkout's src/, also in the conda environment that
# `--sdm conda` builds from environment.yml (it holds the pinned dependencies only).
if os.path.isdir(f"{workflow.basedir}/src"):
    paths = (f"{workflow.basedir}/src", os.environ.get("PYTHONPATH"))
    os.environ.update(PYTHONPATH=os.pathsep.join(p for p in paths if p))


include: "workflow/rules/common.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/truth.smk"
include: "workflow/rules/study1.smk"
include: "workflow/rules/studies.smk"
include: "workflow/rules/study2.smk"
include: "workflow/rules/pseudo_posterior.smk"
include: "workflow/rules/report.smk"


onsuccess:
    stop_rescheduling()


onerror:
    stop_rescheduling()


rule all:
    default_target: True
    input:
        all_targets(),
