"""One Study-1 run in one job (job_structure: bundled): each scenario, its datasets and
every arm x chunk's scores, each unit with the stream it has as its own job, then the
run's summary as study1_summary.py makes it from the files written (here from the same
frames in memory)."""

import logging

import pandas as pd

from dpcounts.data.age_groups import group_population, load_age_groups
from dpcounts.data.counties import load_county_table
from dpcounts.data.scenarios import draw_datasets
from dpcounts.fast_exit import fast_exit
from dpcounts.io import write_json, write_parquet
from dpcounts.studies.study1 import (
    Study1Design,
    datasets_long,
    load_scenario,
    run_rng,
    scenario_frame,
    score_unit,
    summarise_units,
)

logging.basicConfig(filename=snakemake.log[0], level=logging.INFO, force=True)
p, out = snakemake.params, snakemake.output
counties = load_county_table(snakemake.input.counties)  # no geometry needed
over_35 = group_population(load_age_groups(snakemake.input.age_groups), "35+", counties["fips"])
truth = pd.read_parquet(snakemake.input.truth)
design = Study1Design.from_config(p.design)
units = len(design.units)
all_scores, all_sums = [], []  # every unit's frames, for the run's summary
for index, number in enumerate(p.scenarios):
    scenario_path = out.scenarios[index]
    frame = scenario_frame(number, counties, truth, over_35, p.urban_threshold)
    write_parquet(frame, scenario_path)
    # The scenario as written and read back (what the split jobs read); the datasets are
    # scored from memory (the artifact holds the same integers).
    scenario, geo = load_scenario(scenario_path)
    rng = run_rng(p.seed, p.rng_labels, "datasets", number)
    datasets = draw_datasets(scenario, design.datasets, rng).astype("int64", copy=False)
    write_parquet(datasets_long(datasets), out.datasets[index])
    calibrations = {}  # (arm, epsilon): shared by the arm's chunks (no data in them)
    paths = slice(index * units, (index + 1) * units)
    outputs = zip(design.units, out.scores[paths], out.county_sums[paths], strict=True)
    for (arm, chunk), scores_path, sums_path in outputs:
        rng = run_rng(p.seed, p.rng_labels, "score", number, arm, chunk)
        rows = datasets[design.members(chunk)[1]]
        scores, county_sums = score_unit(
            scenario, geo, rows, arm, chunk, design, rng, calibrations=calibrations
        )
        logging.info("scenario %s, %s %s: %d score rows", number, arm, chunk, len(scores))
        write_parquet(scores, scores_path)
        write_parquet(county_sums, sums_path)
        all_scores.append(scores)
        all_sums.append(county_sums)

summary, means, checks = summarise_units(all_scores, all_sums, out.scenarios)
logging.info("summary: %d rows", len(summary))
write_parquet(summary, out.summary)
write_parquet(means, out.county_means)
write_json(checks, out.checks)
fast_exit()  # outputs written: skip the interpreter's teardown
