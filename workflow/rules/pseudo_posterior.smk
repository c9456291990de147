# Hu, Savitsky and Williams (2020): vector-weighted pseudo-posterior synthesizers (LW,
# CW, SW) and re-weighting.
# Jobs per data set: simulate -> fit all six synthesizers (one process: Poisson fits are
# exact conjugate draws, and NUTS for the negative binomial is compiled once) -> synthetic
# data; then one summary and, per data set, one job drawing its figures.
# See config/README.md (pseudo_posterior).

PP = config["pseudo_posterior"]
PP_DATASETS = sorted(PP["datasets"])
PP_FIGURES = [
    "lipschitz",
    "weights",
    "utility_quantiles",
    "utility_centre",
    "posterior_mu",
    "reweighting",
    "synthetic",
]
# The figures of one data set (wildcard), each PNG captioned for the HTML report by its own
# caption (the report renders a caption per job, not per file).
PP_FIGURE_OUTPUTS = {
    stem: report_figures(
        f"pseudo_posterior/{{dataset}}_{stem}",
        f"pseudo_posterior_{stem}.rst",
        "Pseudo-posterior",
        "{dataset}",
    )
    for stem in PP_FIGURES
}

# Lambdas, not defs: `snakemake --lint` wants named functions in common.smk only.
pseudo_posterior_figures = lambda: (
    [
        path
        for dataset in PP_DATASETS
        for stem in PP_FIGURES
        for path in figure_paths(f"pseudo_posterior/{dataset}_{stem}")
    ]
    + [
        "results/pseudo_posterior/records.parquet",
        "results/pseudo_posterior/summary.parquet",
    ]
    if PP["enabled"]
    else []
)
pp_per_dataset = lambda name: expand(
    f"results/pseudo_posterior/{{dataset}}/{name}", dataset=PP_DATASETS
)


# Summaries and figures are light: on a cluster they run where Snakemake runs.
localrules:
    pseudo_posterior_summarize,
    pseudo_posterior_figures,


rule pseudo_posterior_simulate:
    output:
        data="results/pseudo_posterior/{dataset}/data.parquet",
    log:
        "logs/pseudo_posterior/simulate_{dataset}.log",
    benchmark:
        "logs/benchmarks/pseudo_posterior/simulate_{dataset}.tsv"
    priority: 2
    conda:
        DPCOUNTS_ENV
    threads: 1
    params:
        seed=config["seed"],
        spec=lambda wildcards: PP["datasets"][wildcards.dataset],
    script:
        "../scripts/pseudo_posterior_simulate.py"


rule pseudo_posterior_fit:
    input:
        data="results/pseudo_posterior/{dataset}/data.parquet",
    output:
        draws="results/pseudo_posterior/{dataset}/draws.parquet",
        records="results/pseudo_posterior/{dataset}/fit_records.parquet",
        fits="results/pseudo_posterior/{dataset}/fits.json",
    log:
        "logs/pseudo_posterior/fit_{dataset}.log",
    benchmark:
        "logs/benchmarks/pseudo_posterior/fit_{dataset}.tsv"
    priority: 2
    conda:
        DPCOUNTS_ENV
    threads: 1
    params:
        seed=config["seed"],
        section=PP,
    script:
        "../scripts/pseudo_posterior_fit.py"


rule pseudo_posterior_synthesize:
    input:
        draws="results/pseudo_posterior/{dataset}/draws.parquet",
        records="results/pseudo_posterior/{dataset}/fit_records.parquet",
        fits="results/pseudo_posterior/{dataset}/fits.json",
    output:
        utility="results/pseudo_posterior/{dataset}/utility.parquet",
        synthetic="results/pseudo_posterior/{dataset}/synthetic.parquet",
    log:
        "logs/pseudo_posterior/synthesize_{dataset}.log",
    benchmark:
        "logs/benchmarks/pseudo_posterior/synthesize_{dataset}.tsv"
    priority: 2
    conda:
        DPCOUNTS_ENV
    threads: 1
    params:
        seed=config["seed"],
        datasets=PP["synthetic_datasets"],
    script:
        "../scripts/pseudo_posterior_synthesize.py"


rule pseudo_posterior_summarize:
    input:
        draws=pp_per_dataset("draws.parquet"),
        records=pp_per_dataset("fit_records.parquet"),
        fits=pp_per_dataset("fits.json"),
        utility=pp_per_dataset("utility.parquet"),
        synthetic=pp_per_dataset("synthetic.parquet"),
    output:
        records="results/pseudo_posterior/records.parquet",
        summary="results/pseudo_posterior/summary.parquet",
        checks="results/pseudo_posterior/checks.json",
        posterior="results/pseudo_posterior/posterior.parquet",
        utility="results/pseudo_posterior/utility.parquet",
        synthetic="results/pseudo_posterior/synthetic.parquet",
    log:
        "logs/pseudo_posterior/summarize.log",
    benchmark:
        "logs/benchmarks/pseudo_posterior/summarize.tsv"
    priority: 2
    conda:
        DPCOUNTS_ENV
    params:
        datasets=PP_DATASETS,
        tolerance=PP["equal_delta"]["tolerance"],
    script:
        "../scripts/pseudo_posterior_summarize.py"


rule pseudo_posterior_figures:
    input:
        records="results/pseudo_posterior/records.parquet",
        summary="results/pseudo_posterior/summary.parquet",
        posterior="results/pseudo_posterior/posterior.parquet",
        utility="results/pseudo_posterior/utility.parquet",
        synthetic="results/pseudo_posterior/synthetic.parquet",
    output:
        **PP_FIGURE_OUTPUTS,
    log:
        "logs/pseudo_posterior/figures_{dataset}.log",
    benchmark:
        "logs/benchmarks/pseudo_posterior/figures_{dataset}.tsv"
    wildcard_constraints:
        dataset="|".join(PP_DATASETS),
    priority: 1
    conda:
        DPCOUNTS_ENV
    params:
        provenance=pseudo_posterior_provenance,
    script:
        "../scripts/pseudo_posterior_figures.py"
