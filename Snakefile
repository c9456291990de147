# dpsynth: differentially private synthetic count data, end to end.
# Thin on purpose: config + validation, the rule files of each stage, and `all`.
from snakemake.utils import min_version, validate

min_version("9.0")


configfile: "config/config.yaml"


validate(config, "workflow/schemas/config.schema.yaml")


report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/truth.smk"
include: "workflow/rules/study1.smk"
include: "workflow/rules/study2.smk"
include: "workflow/rules/pseudo_posterior.smk"


rule all:
    default_target: True
    input:
        all_targets(),
