# Truth stage: Study 1's true county rates (ages 35-44, 1980) and their map.
# Modelled on the real populations by default; smoothed WONDER rates when configured.

# A lambda, not a def: `snakemake --lint` wants named functions in common.smk only.
truth_figures = lambda: figure_paths("data/true_rates_35_44")


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
    conda:
        "../../environment.yml"
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
    conda:
        "../../environment.yml"
    params:
        source=config["truth"]["source"],
    script:
        "../scripts/truth_map.py"
