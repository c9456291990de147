# Study 2 (seed 001 sec 3): prior predictive truncation on Pennsylvania strata.
# Scenario `pennlc` (real pennLC strata) and `standin` (synthetic paper-scale stand-in);
# jobs: strata -> calibrations per epsilon chunk -> draws per (epsilon, dataset) chunk
# -> per-scenario summary -> figures. See config/README.md (Study 2).

S2 = config["study2"]
S2_EPSILONS = epsilon_grid(
    S2["epsilons"]["start"],
    S2["epsilons"]["stop"],
    S2["epsilons"]["num"],
    S2["figure_epsilons"],
)
S2_SCENARIOS = ["pennlc"] + (["standin"] if S2["standin"]["enabled"] else [])
S2_FIGURES = [
    "figure2_prior",
    "figure3_county_rates",
    "figure4_maps",
    "figure5_disparities",
    "figure6_subgroups",
    "shapes",
]

# The figures of one scenario (wildcard), their PNGs captioned for the HTML report.
S2_FIGURE_OUTPUTS = {
    stem: report_figures(
        f"study2/{{scenario}}/{stem}", "study2_figures.rst", "Study 2", "{scenario}"
    )
    for stem in S2_FIGURES
}

# Lambdas, not defs: `snakemake --lint` wants named functions in common.smk only.
s2_scenario_figures = lambda scenario: [
    path for stem in S2_FIGURES for path in figure_paths(f"study2/{scenario}/{stem}")
]
study2_figures = lambda: (
    figure_paths("study2/figure1_toy")
    + ["results/study2/summary.parquet"]
    + [path for scenario in S2_SCENARIOS for path in s2_scenario_figures(scenario)]
    if S2["enabled"]
    else []
)
s2_echunks = lambda scenario: [
    f"e{i}" for i in range(-(-len(S2_EPSILONS) // S2[scenario]["epsilons_per_job"]))
]
s2_chunks = lambda scenario: chunk_labels(
    len(S2_EPSILONS),
    S2[scenario]["epsilons_per_job"],
    S2["datasets"],
    S2[scenario]["datasets_per_job"],
)
s2_inputs = lambda wildcards, kind: expand(
    f"results/study2/{kind}/{wildcards.scenario}/{{mechanism}}/{{chunk}}.parquet",
    mechanism=S2["mechanisms"],
    chunk=(
        s2_chunks(wildcards.scenario)
        if kind in ("metrics", "county_draws")
        else s2_echunks(wildcards.scenario)
    ),
)


rule study2_strata:
    input:
        pennlc=config["data"]["pennlc_strata"],
        counties=config["data"]["pennsylvania_counties"],
        standard_population=config["data"]["standard_population"],
    output:
        strata="results/study2/{scenario}/strata.parquet",
        counties="results/study2/{scenario}/counties.parquet",
    log:
        "logs/study2/strata_{scenario}.log",
    wildcard_constraints:
        scenario="pennlc|standin",
    conda:
        "../../environment.yml"
    params:
        seed=config["seed"],
        prior_mode=lambda wildcards: S2[wildcards.scenario]["prior"]["mode"],
        prior_epsilon=lambda wildcards: S2[wildcards.scenario]["prior"]["epsilon"],
        standin_total=S2["standin"]["total"],
    script:
        "../scripts/study2_strata.py"


rule study2_calibrate:
    input:
        strata="results/study2/{scenario}/strata.parquet",
    output:
        calibrations="results/study2/calibrations/{scenario}/{mechanism}/{echunk}.parquet",
        status="results/study2/calibration_status/{scenario}/{mechanism}/{echunk}.parquet",
    log:
        "logs/study2/calibrate_{scenario}_{mechanism}_{echunk}.log",
    benchmark:
        "logs/benchmarks/study2/calibrate_{scenario}_{mechanism}_{echunk}.tsv"
    wildcard_constraints:
        scenario="pennlc|standin",
        echunk=r"e\d+",
    conda:
        "../../environment.yml"
    resources:
        runtime=60,
        mem_mb=2000,
    params:
        epsilons=S2_EPSILONS,
        epsilons_per_job=lambda wildcards: S2[wildcards.scenario]["epsilons_per_job"],
        tail=S2["tail"],
        inflation=S2["inflation"],
    script:
        "../scripts/study2_calibrate.py"


rule study2_simulate:
    input:
        strata="results/study2/{scenario}/strata.parquet",
        counties="results/study2/{scenario}/counties.parquet",
        standard_population=config["data"]["standard_population"],
        calibrations=lambda wildcards: (
            f"results/study2/calibrations/{wildcards.scenario}/{wildcards.mechanism}/"
            f"{wildcards.chunk.split('_')[0]}.parquet"
        ),
        status=lambda wildcards: (
            f"results/study2/calibration_status/{wildcards.scenario}/{wildcards.mechanism}/"
            f"{wildcards.chunk.split('_')[0]}.parquet"
        ),
    output:
        metrics="results/study2/metrics/{scenario}/{mechanism}/{chunk}.parquet",
        counties="results/study2/county_draws/{scenario}/{mechanism}/{chunk}.parquet",
    log:
        "logs/study2/simulate_{scenario}_{mechanism}_{chunk}.log",
    benchmark:
        "logs/benchmarks/study2/simulate_{scenario}_{mechanism}_{chunk}.tsv"
    wildcard_constraints:
        scenario="pennlc|standin",
        chunk=r"e\d+_d\d+",
    conda:
        "../../environment.yml"
    resources:
        runtime=60,
        mem_mb=2000,
    params:
        seed=config["seed"],
        epsilons=S2_EPSILONS,
        epsilons_per_job=lambda wildcards: S2[wildcards.scenario]["epsilons_per_job"],
        datasets=S2["datasets"],
        datasets_per_job=lambda wildcards: S2[wildcards.scenario]["datasets_per_job"],
        batch=S2["batch"],
        race_comparison=lambda wildcards: S2[wildcards.scenario]["race_comparison"],
        subgroups=lambda wildcards: S2[wildcards.scenario]["subgroups"],
    script:
        "../scripts/study2_simulate.py"


rule study2_summary:
    input:
        strata="results/study2/{scenario}/strata.parquet",
        counties="results/study2/{scenario}/counties.parquet",
        standard_population=config["data"]["standard_population"],
        calibrations=lambda wildcards: s2_inputs(wildcards, "calibrations"),
        status=lambda wildcards: s2_inputs(wildcards, "calibration_status"),
        metrics=lambda wildcards: s2_inputs(wildcards, "metrics"),
        county_draws=lambda wildcards: s2_inputs(wildcards, "county_draws"),
    output:
        summary="results/study2/{scenario}/summary.parquet",
        county_rates="results/study2/{scenario}/county_rates.parquet",
    log:
        "logs/study2/summary_{scenario}.log",
    wildcard_constraints:
        scenario="pennlc|standin",
    conda:
        "../../environment.yml"
    params:
        race_comparison=lambda wildcards: S2[wildcards.scenario]["race_comparison"],
        subgroups=lambda wildcards: S2[wildcards.scenario]["subgroups"],
    script:
        "../scripts/study2_summary.py"


rule study2_merge:
    input:
        expand("results/study2/{scenario}/summary.parquet", scenario=S2_SCENARIOS),
    output:
        "results/study2/summary.parquet",
    log:
        "logs/study2/merge.log",
    conda:
        "../../environment.yml"
    script:
        "../scripts/study2_merge.py"


rule study2_toy:
    output:
        report_figures("study2/figure1_toy", "study2_toy.rst", "Study 2"),
    log:
        "logs/study2/toy.log",
    conda:
        "../../environment.yml"
    params:
        toy=S2["toy"],
    script:
        "../scripts/study2_toy.py"


rule study2_figures:
    input:
        strata="results/study2/{scenario}/strata.parquet",
        counties="results/study2/{scenario}/counties.parquet",
        map=config["data"]["pennsylvania_counties"],
        summary="results/study2/{scenario}/summary.parquet",
        county_rates="results/study2/{scenario}/county_rates.parquet",
    output:
        **S2_FIGURE_OUTPUTS,
    log:
        "logs/study2/figures_{scenario}.log",
    wildcard_constraints:
        scenario="pennlc|standin",
    conda:
        "../../environment.yml"
    params:
        primary=S2["primary"],
        figure_epsilons=S2["figure_epsilons"],
        figure6=lambda wildcards: S2[wildcards.scenario]["figure6"],
        subgroups=lambda wildcards: S2[wildcards.scenario]["subgroups"],
        race_comparison=lambda wildcards: S2[wildcards.scenario]["race_comparison"],
        prior=lambda wildcards: S2[wildcards.scenario]["prior"],
    script:
        "../scripts/study2_figures.py"


rule study2_standin:
    # The expensive paper-scale run, on request: `snakemake study2_standin`.
    input:
        s2_scenario_figures("standin"),
        "results/study2/standin/summary.parquet",
