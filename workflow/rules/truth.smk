# Truth stage: Study 1's true county rates (ages 35-44, 1980) and their map.
# Modelled on the real populations by default; smoothed WONDER rates when configured.

# A lambda, not a def: `snakemake --lint` wants named functions in common.smk only.
truth_figures = lambda: figure_paths("data/true_rates_35_44")


# Summaries and figures are light: on a cluster they run where Snakemake runs.
localrules:
    truth_map_35_44,


rule truth_rates_35_44:
    input:
        counties=config["data"]["counties"],
        edges=config["data"]["queen_edges"],
        age_groups=config["data"]["age_groups"],
        wonder=(
            [config["truth"]["wonder"]["path"]]
            if config["truth"]["source"] == "wonder"
            else []
        ),
    output:
        truth="results/data/truth_35_44.parquet",
        summary="results/data/truth_35_44_summary.json",
    log:
        "logs/truth/rates_35_44.log",
    benchmark:
        "logs/benchmarks/truth/rates_35_44.tsv"
    priority: 3
    conda:
        DPCOUNTS_ENV
    threads: 1
    params:
        truth=config["truth"],
        seed=config["seed"],
        age_group="35-44",
    script:
        "../scripts/truth_rates.py"


rule truth_map_35_44:
    input:
        counties=config["data"]["counties"],
        truth="results/data/truth_35_44.parquet",
    output:
        report_figures("data/true_rates_35_44", "truth_map.rst", "Data"),
    log:
        "logs/truth/map_35_44.log",
    benchmark:
        "logs/benchmarks/truth/map_35_44.tsv"
    conda:
        DPCOUNTS_ENV
    params:
        source=config["truth"]["source"],
        provenance=prov.lines(prov.truth(config["truth"]), prov.POPULATIONS_1980),
    script:
        "../scripts/truth_map.py"


# Study 1's Appendix C (ages 45-54 ... 85+): totals AND populations modelled; the rates
# mix the 35-44 truth's pattern with an independent draw (see src/dpcounts/data/truth/model.py).
# One job for every configured group: the groups share the CAR field's factor, computed once
# (each group keeps its own generator, so the files are those of one job per group).
rule truth_rates_older:
    input:
        counties=config["data"]["counties"],
        edges=config["data"]["queen_edges"],
        age_groups=config["data"]["age_groups"],
        reference="results/data/truth_35_44.parquet",
    output:
        truth=appendix_c_truth_paths(".parquet"),
        summary=appendix_c_truth_paths("_summary.json"),
    log:
        "logs/truth/rates_older.log",
    benchmark:
        "logs/benchmarks/truth/rates_older.tsv"
    priority: 3
    conda:
        DPCOUNTS_ENV
    threads: 1
    params:
        truth=config["truth"],
        seed=config["seed"],
        age_groups=config["study1"]["appendix_c"]["age_groups"],
        rates_per_100k=appendix_c_rates(),
        correlation=config["study1"]["appendix_c"]["correlation"],
    script:
        "../scripts/truth_rates_older.py"
