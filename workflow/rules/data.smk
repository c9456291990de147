# Data stage: the shipped inputs in data/ (read in place, never copied) -> first maps.

# The data stage's figures: modelled 35-44 population and pennLC crude rates. A lambda,
# not a def: `snakemake --lint` wants named functions in common.smk only.
data_figures = lambda: figure_paths("data/population_35_44") + figure_paths(
    "data/pennlc_crude_rates"
)


# Summaries and figures are light: on a cluster they run where Snakemake runs.
localrules:
    data_map_population_35_44,
    data_map_pennlc_crude_rates,


rule data_map_population_35_44:
    input:
        counties=config["data"]["counties"],
        age_groups=config["data"]["age_groups"],
    output:
        report_figures("data/population_35_44", "data_population.rst", "Data"),
    log:
        "logs/data/population_35_44.log",
    benchmark:
        "logs/benchmarks/data/population_35_44.tsv"
    conda:
        DPCOUNTS_ENV
    params:
        provenance=prov.lines(prov.POPULATIONS_1980),
    script:
        "../scripts/data_map_population_35_44.py"


rule data_map_pennlc_crude_rates:
    input:
        strata=config["data"]["pennlc_strata"],
        counties=config["data"]["pennsylvania_counties"],
    output:
        report_figures("data/pennlc_crude_rates", "data_pennlc.rst", "Data"),
    log:
        "logs/data/pennlc_crude_rates.log",
    benchmark:
        "logs/benchmarks/data/pennlc_crude_rates.tsv"
    conda:
        DPCOUNTS_ENV
    params:
        provenance=prov.lines(prov.PENNLC),
    script:
        "../scripts/data_map_pennlc_crude_rates.py"
