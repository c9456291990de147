# What the HTML report holds besides the figures: the run's whole configuration, as a file.


localrules:
    run_config,


rule run_config:
    output:
        captioned(
            "results/run_config.yaml",
            caption=caption_path("run_config.rst"),
            category="Configuration",
        ),
    log:
        "logs/report/run_config.log",
    benchmark:
        "logs/benchmarks/report/run_config.tsv"
    conda:
        DPCOUNTS_ENV
    params:
        config=run_config(),
        code=prov.code_version(workflow.basedir, dpcounts_version),
    script:
        "../scripts/run_config.py"
