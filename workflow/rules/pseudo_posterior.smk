# Hu, Savitsky and Williams (2020): vector-weighted pseudo-posterior synthesizers (LW,
# CW, SW) and re-weighting.
# Jobs per data set: simulate -> fit all six synthesizers (one process: Poisson fits are
# exact conjugate draws, and NUTS for the negative binomial is compiled once) -> synthetic
# data; then one summary and the figures.
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
    pseudo_posterior_figure,


rule pseudo_posterior_simulate:
    output:
        data="results/pseudo_posterior/{dataset}/data.parquet",
    log:
        "logs/pseudo_posterior/simulate_{dataset}.log",
    benchmark:
        "logs/benchmarks/pseudo_posterior/simulate_{dataset}.tsv"
    priority: 2
    conda:
        DPSYNTH_ENV
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
        DPSYNTH_ENV
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
        DPSYNTH_ENV
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
        DPSYNTH_ENV
    params:
        datasets=PP_DATASETS,
        tolerance=PP["equal_delta"]["tolerance"],
    script:
        "../scripts/pseudo_posterior_summarize.py"


rule pseudo_posterior_figure:
    input:
        records="results/pseudo_posterior/records.parquet",
        summary="results/pseudo_posterior/summary.parquet",
        posterior="results/pseudo_posterior/posterior.parquet",
        utility="results/pseudo_posterior/utility.parquet",
        synthetic="results/pseudo_posterior/synthetic.parquet",
    output:
        report_figures(
            "pseudo_posterior/{dataset}_{figure}",
            "pseudo_posterior.rst",
            "Pseudo-posterior",
            "{dataset}",
        ),
    log:
        "logs/pseudo_posterior/figure_{dataset}_{figure}.log",
    benchmark:
        "logs/benchmarks/pseudo_posterior/figure_{dataset}_{figure}.tsv"
    wildcard_constraints:
        figure="|".join(PP_FIGURES),
    conda:
        DPSYNTH_ENV
    params:
        provenance=pseudo_posterior_provenance,
    script:
        "../scripts/pseudo_posterior_figure.py"
