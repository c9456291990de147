# Study 1 (seed 000 sec 3): four heterogeneity scenarios x mechanisms x epsilon grid.
# Jobs: one per scenario x mechanism x (epsilon chunk, dataset chunk); see config/README.md.

S1 = config["study1"]
S1_EPSILONS = study1_epsilons()
S1_CHUNKS = study1_chunks()

# A lambda, not a def: `snakemake --lint` wants named functions in common.smk only.
study1_figures = lambda: (
    figure_paths("study1/figure1_rmse")
    + figure_paths("study1/figure2_disparities")
    + figure_paths("study1/maps")
    + ["results/study1/checks.json"]
    if S1["enabled"]
    else []
)


rule study1_scenario:
    input:
        truth="results/data/truth_35_44.parquet",
        counties=config["data"]["counties"],
        age_groups=config["data"]["age_groups"],
    output:
        "results/study1/scenario_{scenario}.parquet",
    log:
        "logs/study1/scenario_{scenario}.log",
    wildcard_constraints:
        scenario="[1-4]",
    conda:
        "../../environment.yml"
    params:
        urban_threshold=S1["urban_threshold"],
    script:
        "../scripts/study1_scenario.py"


rule study1_datasets:
    input:
        "results/study1/scenario_{scenario}.parquet",
    output:
        "results/study1/datasets/scenario_{scenario}.parquet",
    log:
        "logs/study1/datasets_{scenario}.log",
    wildcard_constraints:
        scenario="[1-4]",
    conda:
        "../../environment.yml"
    params:
        seed=config["seed"],
        datasets=S1["datasets"],
    script:
        "../scripts/study1_datasets.py"


rule study1_score:
    input:
        scenario="results/study1/scenario_{scenario}.parquet",
        datasets="results/study1/datasets/scenario_{scenario}.parquet",
    output:
        scores="results/study1/scores/{scenario}/{mechanism}/{chunk}.parquet",
        county_sums="results/study1/county_sums/{scenario}/{mechanism}/{chunk}.parquet",
    log:
        "logs/study1/score_{scenario}_{mechanism}_{chunk}.log",
    wildcard_constraints:
        scenario="[1-4]",
        chunk=r"e\d+_d\d+",
    conda:
        "../../environment.yml"
    resources:
        runtime=20,
        mem_mb=1500,
    params:
        seed=config["seed"],
        epsilons=S1_EPSILONS,
        epsilons_per_job=S1["epsilons_per_job"],
        datasets=S1["datasets"],
        datasets_per_job=S1["datasets_per_job"],
        map_epsilons=S1["map_epsilons"],
        prior_budget_fraction=S1["prior_budget_fraction"],
    script:
        "../scripts/study1_score.py"


rule study1_summary:
    input:
        scenarios=expand(
            "results/study1/scenario_{scenario}.parquet", scenario=S1["scenarios"]
        ),
        scores=expand(
            "results/study1/scores/{scenario}/{mechanism}/{chunk}.parquet",
            scenario=S1["scenarios"],
            mechanism=S1["mechanisms"],
            chunk=S1_CHUNKS,
        ),
        county_sums=expand(
            "results/study1/county_sums/{scenario}/{mechanism}/{chunk}.parquet",
            scenario=S1["scenarios"],
            mechanism=S1["mechanisms"],
            chunk=S1_CHUNKS,
        ),
    output:
        summary="results/study1/summary.parquet",
        county_means="results/study1/county_means.parquet",
    log:
        "logs/study1/summary.log",
    conda:
        "../../environment.yml"
    script:
        "../scripts/study1_summary.py"


rule study1_checks:
    input:
        "results/study1/summary.parquet",
    output:
        "results/study1/checks.json",
    log:
        "logs/study1/checks.log",
    conda:
        "../../environment.yml"
    script:
        "../scripts/study1_checks.py"


rule study1_figures:
    input:
        "results/study1/summary.parquet",
    output:
        rmse=report_figures("study1/figure1_rmse", "study1_figure1.rst", "Study 1"),
        disparities=report_figures(
            "study1/figure2_disparities", "study1_figure2.rst", "Study 1"
        ),
    log:
        "logs/study1/figures.log",
    conda:
        "../../environment.yml"
    script:
        "../scripts/study1_figures.py"


rule study1_maps:
    input:
        counties=config["data"]["counties"],
        county_means="results/study1/county_means.parquet",
        scenario="results/study1/scenario_4.parquet",
    output:
        report_figures("study1/maps", "study1_maps.rst", "Study 1"),
    log:
        "logs/study1/maps.log",
    conda:
        "../../environment.yml"
    params:
        map_epsilons=S1["map_epsilons"],
    script:
        "../scripts/study1_maps.py"
