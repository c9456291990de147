# Studies on the analyst's own strata (config `studies`; docs/your-study.md). Jobs per
# study: strata (+ prior) -> calibrations per arm x epsilon chunk -> draws per arm x
# (epsilon, set) chunk -> summary and epsilon guide -> figures.

STUDIES = checked_studies()
STUDY_FIGURES = ["measures", "guide"]

# Lambdas, not defs: `snakemake --lint` wants named functions in common.smk only.
study_maps = lambda name: bool(STUDIES[name].geometry and STUDIES[name].map_epsilons)
study_figure_stems = lambda name: (
    STUDY_FIGURES
    + (["maps"] if study_maps(name) else [])
    + (["attack"] if STUDIES[name].suppression else [])
    + (["suppressed"] if STUDIES[name].suppression and study_maps(name) else [])
    + (["coverage"] if STUDIES[name].coverage else [])
)
STUDIES_ENABLED = [
    name
    for name, entry in config.get("studies", {}).items()
    if entry.get("enabled", True)
]
studies_figures = lambda: [
    path
    for name in STUDIES_ENABLED
    for stem in study_figure_stems(name)
    for path in figure_paths(f"studies/{name}/{stem}")
] + [f"results/studies/{name}/guide.csv" for name in STUDIES_ENABLED]
study_echunks = lambda w: STUDIES[w.study].calibration_chunks
study_chunks = lambda w: STUDIES[w.study].chunks
study_arm_inputs = lambda w, kind, chunks: expand(
    f"results/studies/{w.study}/{kind}/{{arm}}/{{chunk}}.parquet",
    arm=[arm.name for arm in STUDIES[w.study].arms],
    chunk=chunks(w),
)
study_inputs = lambda w: {
    "table": str(STUDIES[w.study].table),
    **(
        {"standard_population": str(STUDIES[w.study].standard_population)}
        if STUDIES[w.study].age
        else {}
    ),
    **(
        {"prior": str(STUDIES[w.study].prior.path)}
        if STUDIES[w.study].prior.path
        else {}
    ),
}


# Summaries and figures are light: on a cluster they run where Snakemake runs.
localrules:
    study_summary,
    study_figures,
    study_attack,
    study_maps,
    study_suppressed,
    study_coverage_figure,
    studies,


rule study_strata:
    input:
        unpack(study_inputs),
    output:
        strata="results/studies/{study}/strata.parquet",
        prior="results/studies/{study}/prior.json",
        table="results/studies/{study}/table.json",
    log:
        "logs/studies/{study}/strata.log",
    benchmark:
        "logs/benchmarks/studies/{study}/strata.tsv"
    priority: 2
    conda:
        DPCOUNTS_ENV
    threads: 1
    params:
        seed=config["seed"],
        entry=study_entry,
    script:
        "../scripts/study_strata.py"


# job_structure (config; the profile chooses): `split` runs each calibration chunk, each
# draw chunk and the no-privacy reference as its own job, `bundled` one job per study
# doing all of them in order (its imports, strata and measures paid once, not per arm).
# The chunks and their random streams are the same, so are the outputs.
if config["job_structure"] == "split":

    rule study_calibrate:
        input:
            strata="results/studies/{study}/strata.parquet",
        output:
            calibrations="results/studies/{study}/calibrations/{arm}/{echunk}.parquet",
            status="results/studies/{study}/calibration_status/{arm}/{echunk}.parquet",
        log:
            "logs/studies/{study}/calibrate_{arm}_{echunk}.log",
        benchmark:
            "logs/benchmarks/studies/{study}/calibrate_{arm}_{echunk}.tsv"
        wildcard_constraints:
            echunk=r"e\d+",
        priority: 1
        conda:
            DPCOUNTS_ENV
        threads: 1
        resources:
            runtime=60,
            mem_mb=2000,
        params:
            entry=study_entry,
        script:
            "../scripts/study_calibrate.py"

    rule study_simulate:
        input:
            unpack(study_inputs),
            strata="results/studies/{study}/strata.parquet",
            calibrations=study_calibration_path,
        output:
            metrics="results/studies/{study}/metrics/{arm}/{chunk}.parquet",
            area_sums="results/studies/{study}/area_sums/{arm}/{chunk}.parquet",
        log:
            "logs/studies/{study}/simulate_{arm}_{chunk}.log",
        benchmark:
            "logs/benchmarks/studies/{study}/simulate_{arm}_{chunk}.tsv"
        wildcard_constraints:
            chunk=r"e\d+_d\d+",
        priority: 1
        conda:
            DPCOUNTS_ENV
        threads: 1
        resources:
            runtime=60,
            mem_mb=2000,
        params:
            seed=config["seed"],
            entry=study_entry,
        script:
            "../scripts/study_simulate.py"

    # The no-privacy reference: tables drawn with the privacy term removed (every arm's limit
    # as epsilon grows), measured as the arms' are: what synthesis alone keeps.
    rule study_reference:
        input:
            unpack(study_inputs),
            strata="results/studies/{study}/strata.parquet",
        output:
            reference="results/studies/{study}/reference.parquet",
        log:
            "logs/studies/{study}/reference.log",
        benchmark:
            "logs/benchmarks/studies/{study}/reference.tsv"
        priority: 1
        conda:
            DPCOUNTS_ENV
        threads: 1
        resources:
            runtime=60,
            mem_mb=2000,
        params:
            seed=config["seed"],
            entry=study_entry,
        script:
            "../scripts/study_reference.py"

else:
    for bundled_study in STUDIES:

        rule:
            name:
                f"study_bundle_{bundled_study}"
            input:
                unpack(study_inputs),
                strata="results/studies/{study}/strata.parquet",
            output:
                calibrations=study_chunk_paths(bundled_study, "calibrations", "e"),
                status=study_chunk_paths(bundled_study, "calibration_status", "e"),
                metrics=study_chunk_paths(bundled_study, "metrics", "e_d"),
                area_sums=study_chunk_paths(bundled_study, "area_sums", "e_d"),
                reference="results/studies/{study}/reference.parquet",
            log:
                "logs/studies/{study}/study_bundle.log",
            benchmark:
                "logs/benchmarks/studies/{study}/study_bundle.tsv"
            wildcard_constraints:
                study=bundled_study,
            priority: 1
            conda:
                DPCOUNTS_ENV
            threads: 1
            resources:
                runtime=240,
                mem_mb=2000,
            params:
                seed=config["seed"],
                study=bundled_study,
                entry=config["studies"][bundled_study],
            script:
                "../scripts/study_bundle.py"


rule study_suppression:
    # the suppression arm (config `studies.<name>.suppression`): one table, no epsilon
    input:
        unpack(study_inputs),
        strata="results/studies/{study}/strata.parquet",
    output:
        "results/studies/{study}/suppression.json",
    log:
        "logs/studies/{study}/suppression.log",
    benchmark:
        "logs/benchmarks/studies/{study}/suppression.tsv"
    priority: 1
    conda:
        DPCOUNTS_ENV
    threads: 1
    params:
        seed=config["seed"],
        entry=study_entry,
    script:
        "../scripts/study_suppression.py"


rule study_summary:
    input:
        unpack(study_inputs),
        suppression=lambda w: (
            [f"results/studies/{w.study}/suppression.json"]
            if STUDIES[w.study].suppression
            else []
        ),
        strata="results/studies/{study}/strata.parquet",
        prior="results/studies/{study}/prior.json",
        reference="results/studies/{study}/reference.parquet",
        calibrations=lambda w: study_arm_inputs(w, "calibrations", study_echunks),
        status=lambda w: study_arm_inputs(w, "calibration_status", study_echunks),
        metrics=lambda w: study_arm_inputs(w, "metrics", study_chunks),
        area_sums=lambda w: study_arm_inputs(w, "area_sums", study_chunks),
        # the coverage rows of the guide (config `studies.<name>.coverage`)
        coverage=lambda w: (
            [f"results/studies/{w.study}/coverage.parquet"]
            if STUDIES[w.study].coverage
            else []
        ),
    output:
        summary="results/studies/{study}/summary.parquet",
        area_rates="results/studies/{study}/area_rates.parquet",
        guide="results/studies/{study}/guide.csv",
        # what the guide judged (the entry, its files' bytes, the measures' version):
        # `dpcounts synthesize --study` refuses a guide that is missing or stale
        fingerprint="results/studies/{study}/guide.json",
    log:
        "logs/studies/{study}/summary.log",
    benchmark:
        "logs/benchmarks/studies/{study}/summary.tsv"
    priority: 1
    conda:
        DPCOUNTS_ENV
    params:
        entry=study_entry,
    script:
        "../scripts/study_summary.py"


rule study_figures:
    input:
        summary="results/studies/{study}/summary.parquet",
        suppression=lambda w: (
            [f"results/studies/{w.study}/suppression.json"]
            if STUDIES[w.study].suppression
            else []
        ),
        area_rates="results/studies/{study}/area_rates.parquet",
        guide="results/studies/{study}/guide.csv",
        geometry=lambda w: (
            [str(STUDIES[w.study].geometry)] if study_maps(w.study) else []
        ),
    output:
        measures=report_figures(
            "studies/{study}/measures", "study_measures.rst", "Studies", "{study}"
        ),
        guide=report_figures(
            "studies/{study}/guide", "study_guide.rst", "Studies", "{study}"
        ),
    log:
        "logs/studies/{study}/figures.log",
    benchmark:
        "logs/benchmarks/studies/{study}/figures.tsv"
    priority: 1
    conda:
        DPCOUNTS_ENV
    params:
        entry=study_entry,
        provenance=study_provenance,
    script:
        "../scripts/study_figures.py"


rule study_attack:
    # the differencing attack on the suppressed table against the DP arms' tables
    input:
        summary="results/studies/{study}/summary.parquet",
        suppression="results/studies/{study}/suppression.json",
    output:
        report_figures(
            "studies/{study}/attack", "study_attack.rst", "Studies", "{study}"
        ),
    log:
        "logs/studies/{study}/attack.log",
    benchmark:
        "logs/benchmarks/studies/{study}/attack.tsv"
    priority: 1
    conda:
        DPCOUNTS_ENV
    params:
        entry=study_entry,
        provenance=study_provenance,
    script:
        "../scripts/study_attack.py"


rule study_maps:
    input:
        area_rates="results/studies/{study}/area_rates.parquet",
        geometry=lambda w: str(STUDIES[w.study].geometry),
    output:
        report_figures("studies/{study}/maps", "study_maps.rst", "Studies", "{study}"),
    log:
        "logs/studies/{study}/maps.log",
    benchmark:
        "logs/benchmarks/studies/{study}/maps.tsv"
    priority: 1
    conda:
        DPCOUNTS_ENV
    params:
        entry=study_entry,
        provenance=study_provenance,
    script:
        "../scripts/study_maps.py"


rule study_suppressed:
    # the suppressed table mapped beside the true and the synthetic area rates
    input:
        strata="results/studies/{study}/strata.parquet",
        area_rates="results/studies/{study}/area_rates.parquet",
        geometry=lambda w: str(STUDIES[w.study].geometry),
    output:
        report_figures(
            "studies/{study}/suppressed", "study_suppressed.rst", "Studies", "{study}"
        ),
    log:
        "logs/studies/{study}/suppressed.log",
    benchmark:
        "logs/benchmarks/studies/{study}/suppressed.tsv"
    priority: 1
    conda:
        DPCOUNTS_ENV
    params:
        entry=study_entry,
        provenance=study_provenance,
    script:
        "../scripts/study_suppressed.py"


# Coverage (config `studies.<name>.coverage`; dpcounts.studies.stage.coverage): its own
# draws, each group of `sets` tables one release, scored by each interval method and
# quantity; the summary rule puts its rows in words into the guide (guide.csv).
rule study_coverage:
    input:
        strata="results/studies/{study}/strata.parquet",
        prior="results/studies/{study}/prior.json",
        calibrations=lambda w: study_arm_inputs(w, "calibrations", study_echunks),
    output:
        coverage="results/studies/{study}/coverage.parquet",
    log:
        "logs/studies/{study}/coverage.log",
    benchmark:
        "logs/benchmarks/studies/{study}/coverage.tsv"
    priority: 1
    conda:
        DPCOUNTS_ENV
    threads: 1
    resources:
        runtime=120,
        mem_mb=4000,
    params:
        seed=config["seed"],
        entry=study_entry,
    script:
        "../scripts/study_coverage.py"


rule study_coverage_figure:
    input:
        coverage="results/studies/{study}/coverage.parquet",
        prior="results/studies/{study}/prior.json",
    output:
        report_figures(
            "studies/{study}/coverage", "study_coverage.rst", "Studies", "{study}"
        ),
    log:
        "logs/studies/{study}/coverage_figure.log",
    benchmark:
        "logs/benchmarks/studies/{study}/coverage_figure.tsv"
    priority: 1
    conda:
        DPCOUNTS_ENV
    params:
        entry=study_entry,
        provenance=study_provenance,
    script:
        "../scripts/study_coverage_figure.py"


rule studies:
    # Every enabled study's figures and guide: `snakemake --cores 2 studies`.
    input:
        studies_figures(),
