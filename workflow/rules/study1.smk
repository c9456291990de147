# Study 1 (Quick 2021, JRSS-A, Section 3): four heterogeneity scenarios x arms x epsilon grid.
# Jobs: one per scenario x arm x (epsilon chunk, dataset chunk); see config/README.md. The
# library builds the design (arms, epsilon grid, chunks) from the config: study1_design().
# The wildcard `run` is the run's folder: study1 (ages 35-44, the paper's study) or
# study1/appendix_c/<age> (Appendix C's older groups; truth, totals and populations
# modelled), so the same rules build both.

S1 = config["study1"]
S1C = S1["appendix_c"]
S1_DESIGN = study1_design()
#: The report's subcategory of the main study's figures (Appendix C has its own).
S1_MAIN = "Figures 1-2 and maps (ages 35-44)"
#: What a job receives to rebuild the design (Study1Design.from_config): config values.
S1_DESIGN_ENTRY = Study1Design.entry(S1)
checked_study1_coverage()  # a bad `study1.coverage` stops the run here, naming its key

# Lambdas, not defs: `snakemake --lint` wants named functions in common.smk only.
appendix_c_figures = lambda: (
    figure_paths("study1/appendix_c_rmse")
    + figure_paths("study1/appendix_c_disparities")
    + [f"results/{run}/checks.json" for run in appendix_c_runs()]
    if S1C["enabled"]
    else []
)
study1_coverage_targets = lambda: (
    figure_paths("study1/coverage") + ["results/study1/coverage.csv"]
    if S1["coverage"]["enabled"]
    else []
)
study1_figures = lambda: (
    figure_paths("study1/figure1_rmse")
    + figure_paths("study1/figure2_disparities")
    + figure_paths("study1/maps")
    + ["results/study1/checks.json"]
    + study1_coverage_targets()
    + appendix_c_figures()
    if S1["enabled"]
    else []
)


# job_structure (config; the profile chooses): `split` runs each unit as its own job (a
# cluster's many small jobs), `bundled` one job per run: its scenarios, then its summary
# (a laptop's few heavy ones).
# The units and their random streams are the same, so are the outputs, byte for byte.


# Summaries and figures are light: on a cluster they run where Snakemake runs.
localrules:
    study1_figures,
    study1_maps,
    study1_coverage_figure,
    study1_appendix_c_summary,
    study1_appendix_c_figures,


if config["job_structure"] == "split":

    rule study1_scenario:
        input:
            truth=study1_truth,
            counties=config["data"]["counties"],
            age_groups=config["data"]["age_groups"],
        output:
            "results/{run}/scenario_{scenario}.parquet",
        log:
            "logs/{run}/scenario_{scenario}.log",
        benchmark:
            "logs/benchmarks/{run}/scenario_{scenario}.tsv"
        wildcard_constraints:
            run=STUDY1_RUNS,
            scenario="[1-4]",
        priority: 1
        conda:
            DPCOUNTS_ENV
        threads: 1
        params:
            urban_threshold=S1["urban_threshold"],
        script:
            "../scripts/study1_scenario.py"

    rule study1_datasets:
        input:
            "results/{run}/scenario_{scenario}.parquet",
        output:
            "results/{run}/datasets/scenario_{scenario}.parquet",
        log:
            "logs/{run}/datasets_{scenario}.log",
        benchmark:
            "logs/benchmarks/{run}/datasets_{scenario}.tsv"
        wildcard_constraints:
            run=STUDY1_RUNS,
            scenario="[1-4]",
        priority: 1
        conda:
            DPCOUNTS_ENV
        threads: 1
        params:
            seed=config["seed"],
            rng_labels=lambda w: study1_rng_labels(w.run),
            design=S1_DESIGN_ENTRY,
        script:
            "../scripts/study1_datasets.py"

    rule study1_score:
        input:
            scenario="results/{run}/scenario_{scenario}.parquet",
            datasets="results/{run}/datasets/scenario_{scenario}.parquet",
        output:
            scores="results/{run}/scores/{scenario}/{arm}/{chunk}.parquet",
            county_sums="results/{run}/county_sums/{scenario}/{arm}/{chunk}.parquet",
        log:
            "logs/{run}/score_{scenario}_{arm}_{chunk}.log",
        benchmark:
            "logs/benchmarks/{run}/score_{scenario}_{arm}_{chunk}.tsv"
        wildcard_constraints:
            run=STUDY1_RUNS,
            scenario="[1-4]",
            chunk=r"e\d+_d\d+",
        priority: 1
        conda:
            DPCOUNTS_ENV
        threads: 1
        resources:
            runtime=20,
            mem_mb=1500,
        params:
            seed=config["seed"],
            rng_labels=lambda w: study1_rng_labels(w.run),
            design=S1_DESIGN_ENTRY,
        script:
            "../scripts/study1_score.py"

    # The run's summary (in the bundled structure, the run's job makes it).
    localrules:
        study1_summary,

    rule study1_summary:
        input:
            scenarios=lambda w: expand(
                "results/{run}/scenario_{scenario}.parquet",
                run=w.run,
                scenario=study1_run_scenarios(w.run),
            ),
            scores=lambda w: study1_unit_inputs(w, "scores"),
            county_sums=lambda w: study1_unit_inputs(w, "county_sums"),
        output:
            summary="results/{run}/summary.parquet",
            county_means="results/{run}/county_means.parquet",
            checks="results/{run}/checks.json",
        log:
            "logs/{run}/summary.log",
        benchmark:
            "logs/benchmarks/{run}/summary.tsv"
        wildcard_constraints:
            run=STUDY1_RUNS,
        priority: 2
        conda:
            DPCOUNTS_ENV
        script:
            "../scripts/study1_summary.py"

else:
    # One job per run (the main study, each Appendix C age group): its scenarios, their
    # datasets, every arm x chunk's scores, then the run's summary.
    for bundled_run, bundled_scenarios in [
        ("study1", S1["scenarios"]),
        (f"study1/appendix_c/(?:{APPENDIX_C_SLUGS})", S1C["scenarios"]),
    ]:

        rule:
            name:
                "study1_bundle"
                if bundled_run == "study1"
                else "study1_appendix_c_bundle"
            input:
                truth=study1_truth,
                counties=config["data"]["counties"],
                age_groups=config["data"]["age_groups"],
            output:
                scenarios=study1_bundle_paths(bundled_scenarios, "scenario"),
                datasets=study1_bundle_paths(bundled_scenarios, "datasets"),
                scores=study1_bundle_paths(bundled_scenarios, "scores"),
                county_sums=study1_bundle_paths(bundled_scenarios, "county_sums"),
                summary="results/{run}/summary.parquet",
                county_means="results/{run}/county_means.parquet",
                checks="results/{run}/checks.json",
            log:
                "logs/{run}/study1_bundle.log",
            benchmark:
                "logs/benchmarks/{run}/study1_bundle.tsv"
            wildcard_constraints:
                run=bundled_run,
            priority: 2
            conda:
                DPCOUNTS_ENV
            threads: 1
            resources:
                runtime=120,
                mem_mb=1500,
            params:
                scenarios=bundled_scenarios,
                urban_threshold=S1["urban_threshold"],
                seed=config["seed"],
                rng_labels=lambda w: study1_rng_labels(w.run),
                design=S1_DESIGN_ENTRY,
            script:
                "../scripts/study1_bundle.py"


rule study1_figures:
    input:
        "results/study1/summary.parquet",
    output:
        rmse=report_figures(
            "study1/figure1_rmse", "study1_figure1.rst", "Study 1", S1_MAIN
        ),
        disparities=report_figures(
            "study1/figure2_disparities", "study1_figure2.rst", "Study 1", S1_MAIN
        ),
    log:
        "logs/study1/figures.log",
    benchmark:
        "logs/benchmarks/study1/figures.tsv"
    priority: 1
    conda:
        DPCOUNTS_ENV
    params:
        provenance=study1_provenance(),
    script:
        "../scripts/study1_figures.py"


rule study1_maps:
    input:
        counties=config["data"]["counties"],
        county_means="results/study1/county_means.parquet",
        scenario="results/study1/scenario_4.parquet",
    output:
        report_figures("study1/maps", "study1_maps.rst", "Study 1", S1_MAIN),
    log:
        "logs/study1/maps.log",
    benchmark:
        "logs/benchmarks/study1/maps.tsv"
    priority: 1
    conda:
        DPCOUNTS_ENV
    params:
        design=S1_DESIGN_ENTRY,
        provenance=study1_provenance(),
    script:
        "../scripts/study1_maps.py"


# ---- Coverage (config `study1.coverage`; dpcounts.studies.study1_coverage): each of the
# first datasets released once as `sets` tables by each arm, scored by each interval method.
rule study1_coverage:
    input:
        scenarios=expand(
            "results/study1/scenario_{scenario}.parquet",
            scenario=S1["coverage"]["scenarios"],
        ),
        datasets=expand(
            "results/study1/datasets/scenario_{scenario}.parquet",
            scenario=S1["coverage"]["scenarios"],
        ),
    output:
        coverage="results/study1/coverage.parquet",
        guide="results/study1/coverage.csv",
    log:
        "logs/study1/coverage.log",
    benchmark:
        "logs/benchmarks/study1/coverage.tsv"
    priority: 1
    conda:
        DPCOUNTS_ENV
    threads: 1
    resources:
        runtime=30,
        mem_mb=2000,
    params:
        seed=config["seed"],
        study1={
            **S1_DESIGN_ENTRY,
            "scenarios": S1["scenarios"],
            "coverage": S1["coverage"],
        },
    script:
        "../scripts/study1_coverage.py"


rule study1_coverage_figure:
    input:
        "results/study1/coverage.parquet",
    output:
        report_figures("study1/coverage", "study1_coverage.rst", "Study 1", S1_MAIN),
    log:
        "logs/study1/coverage_figure.log",
    benchmark:
        "logs/benchmarks/study1/coverage_figure.tsv"
    priority: 1
    conda:
        DPCOUNTS_ENV
    params:
        provenance=study1_provenance(),
    script:
        "../scripts/study1_coverage_figure.py"


# ---- Appendix C: the older age groups, stacked with an age_group column -----------------
rule study1_appendix_c_summary:
    input:
        lambda w: [f"results/{run}/summary.parquet" for run in appendix_c_runs()],
    output:
        "results/study1/appendix_c/summary.parquet",
    log:
        "logs/study1/appendix_c/summary.log",
    benchmark:
        "logs/benchmarks/study1/appendix_c/summary.tsv"
    priority: 2
    conda:
        DPCOUNTS_ENV
    params:
        age_groups=S1C["age_groups"],
    script:
        "../scripts/study1_appendix_c_summary.py"


rule study1_appendix_c_figures:
    input:
        "results/study1/appendix_c/summary.parquet",
    output:
        rmse=report_figures(
            "study1/appendix_c_rmse",
            "study1_appendix_c_rmse.rst",
            "Study 1",
            "Appendix C (older ages)",
        ),
        disparities=report_figures(
            "study1/appendix_c_disparities",
            "study1_appendix_c_disparities.rst",
            "Study 1",
            "Appendix C (older ages)",
        ),
    log:
        "logs/study1/appendix_c/figures.log",
    benchmark:
        "logs/benchmarks/study1/appendix_c/figures.tsv"
    priority: 2
    conda:
        DPCOUNTS_ENV
    params:
        correlation=S1C["correlation"],
        provenance=study1_provenance(appendix=True),
    script:
        "../scripts/study1_appendix_c_figures.py"
