# Study 2 (Quick 2022, prior predictive truncation, Section 3) on Pennsylvania strata: two
# configured studies of the study stage (config `studies.pennlc` and `studies.standin`,
# rules in studies.smk) whose input tables this file builds, plus the toy example and the
# paper's figures. See config/README.md (Study 2).

S2 = config["study2"]
S2_STUDIES = [name for name in ("pennlc", "standin") if name in STUDIES]
S2_FIGURES = [
    "figure2_prior",
    "figure3_county_rates",
    "figure4_maps",
    "figure5_disparities",
    "figure6_subgroups",
    "shapes",
]

# The figures of one study (wildcard), their PNGs captioned for the HTML report.
S2_FIGURE_OUTPUTS = {
    stem: report_figures(
        f"study2/{{study}}/{stem}", f"study2_{stem}.rst", "Study 2", "{study}"
    )
    for stem in S2_FIGURES
}

# Lambdas, not defs: `snakemake --lint` wants named functions in common.smk only.
s2_study_figures = lambda study: [
    path for stem in S2_FIGURES for path in figure_paths(f"study2/{study}/{stem}")
]
study2_figures = lambda: (
    figure_paths("study2/figure1_toy")
    + [
        path
        for study in S2_STUDIES
        if config["studies"][study].get("enabled", True)
        for path in s2_study_figures(study)
    ]
    if S2["enabled"]
    else []
)


# Summaries and figures are light: on a cluster they run where Snakemake runs.
localrules:
    study2_toy,
    study2_figures,
    study2_standin,


rule study2_table:
    input:
        pennlc=config["data"]["pennlc_strata"],
        counties=config["data"]["pennsylvania_counties"],
        standard_population=config["data"]["standard_population"],
    output:
        "results/study2/{study}/table.parquet",
    log:
        "logs/study2/table_{study}.log",
    benchmark:
        "logs/benchmarks/study2/table_{study}.tsv"
    wildcard_constraints:
        study="pennlc|standin",
    priority: 2
    conda:
        DPCOUNTS_ENV
    threads: 1
    params:
        seed=config["seed"],
        standin_total=S2["standin"]["total"],
    script:
        "../scripts/study2_table.py"


rule study2_toy:
    output:
        report_figures("study2/figure1_toy", "study2_toy.rst", "Study 2"),
    log:
        "logs/study2/toy.log",
    benchmark:
        "logs/benchmarks/study2/toy.tsv"
    conda:
        DPCOUNTS_ENV
    params:
        toy=S2["toy"],
        arms=S2["arms"],
        provenance=prov.lines(prov.TOY),
    script:
        "../scripts/study2_toy.py"


rule study2_figures:
    input:
        strata="results/studies/{study}/strata.parquet",
        summary="results/studies/{study}/summary.parquet",
        area_rates="results/studies/{study}/area_rates.parquet",
        map=config["data"]["pennsylvania_counties"],
    output:
        **S2_FIGURE_OUTPUTS,
    log:
        "logs/study2/figures_{study}.log",
    benchmark:
        "logs/benchmarks/study2/figures_{study}.tsv"
    wildcard_constraints:
        study="pennlc|standin",
    priority: 1
    conda:
        DPCOUNTS_ENV
    params:
        entry=study_entry,
        arms=S2["arms"],
        primary=S2["primary"],
        figure5=lambda wildcards: S2[wildcards.study]["figure5"],
        figure6=lambda wildcards: S2[wildcards.study]["figure6"],
        provenance=study_provenance,
    script:
        "../scripts/study2_figures.py"


rule study2_standin:
    # The expensive paper-scale run, on request: `snakemake study2_standin`.
    input:
        s2_study_figures("standin"),
        figure_paths("studies/standin/guide"),
