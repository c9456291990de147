"""Wall time and peak memory of Study 2's stand-in run (47,034 strata, y. = 26,116).

Run from the repository root::

    .venv/bin/python benchmarks/study2.py                        # the full design
    .venv/bin/python benchmarks/study2.py --epsilons 2 --sets 100   # a slice of it

The full design is the workflow's stand-in run: the epsilon grid of the default config
(20 log-spaced values from 0.01 to 4, plus 1 and 4 if missing), L = 1000 synthetic sets, the
untruncated and the three truncated mechanisms. Every (mechanism, epsilon) cell is one
task run in a pool of ``--workers`` processes (2 = the laptop profile): calibrate, build
the exact sampler once, draw and measure the sets in batches of 100 (exactly what the
workflow's jobs do, without Snakemake's per-job start-up). The stand-in itself is built
once, as the workflow's ``study2_table`` job builds it.

Prints one line per task (calibration, sampler build, draws+metrics seconds, peak RSS of
the worker) and the totals: wall time, summed CPU seconds by stage, and the largest
worker peak RSS (a bound on the run's peak is ``workers`` times it plus the parent's).
With ``--epsilons`` below the grid size the grid is subsampled evenly (log scale), and
``--epsilon-values`` runs chosen epsilons; the totals then cover that slice only.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import platform
import resource
import time
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from dpcounts.config_check import check_config
from dpcounts.data.pennsylvania import load_pennlc, load_pennsylvania_counties
from dpcounts.data.standard_population import load_standard_population
from dpcounts.design import grid_from_config
from dpcounts.seeding import job_rng
from dpcounts.studies.stage.definition import study_definition
from dpcounts.studies.stage.measures import study_measures
from dpcounts.studies.stage.prior import prior_rates
from dpcounts.studies.stage.simulate import calibrate_arm, draw_and_measure
from dpcounts.studies.stage.table import load_study_table
from dpcounts.studies.study2.tables import study_table

REPO = Path(__file__).resolve().parents[1]
SEED = 20190601
_STATE: dict = {}


def standin_config() -> dict:
    """config/config.yaml checked against its schema (defaults filled): the benchmark runs
    the study ``standin`` as configured."""
    config = yaml.safe_load((REPO / "config/config.yaml").read_text())
    check_config(config, REPO / "workflow/schemas/config.schema.yaml")
    return config


def build_standin():
    """The study `standin` of config/config.yaml (its table built as the workflow's
    ``study2_table`` job builds it), its strata with the national prior, and its measures."""
    import tempfile

    config = standin_config()
    entry = config["studies"]["standin"]
    table = study_table(
        "standin",
        load_pennlc(REPO / "data/pennlc_strata.parquet"),
        load_pennsylvania_counties(REPO / "data/pennsylvania_counties.parquet"),
        load_standard_population(REPO / "data/us_standard_population_2000.csv"),
        job_rng(SEED, "study2", "standin", "standin"),
        standin_total=config["study2"]["standin"]["total"],
    )
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "table.parquet"
        table.to_parquet(path)
        definition = study_definition("standin", entry | {"table": str(path)}, base=REPO)
        strata = load_study_table(definition)
    strata["prior_rate"], _ = prior_rates(definition, strata, job_rng(SEED, "prior"))
    return definition, strata, study_measures(definition, strata)


def _init_worker():
    _STATE["study"] = build_standin()


def run_task(task):
    """One (mechanism, epsilon) cell: calibrate, build the sampler, draw and measure."""
    label, epsilon, n_sets, batch = task
    definition, strata, measures = _STATE["study"]
    arm = definition.arm(label)
    out = {"mechanism": label, "epsilon": epsilon}
    start = time.perf_counter()
    try:
        cal = calibrate_arm(definition, arm, epsilon, strata)
    except (ValueError, RuntimeError) as error:
        out.update(calibration_s=time.perf_counter() - start, error=str(error)[:200])
        return out
    out["calibration_s"] = time.perf_counter() - start
    out["a_median"], out["a_max"] = float(np.median(cal.a)), float(cal.a.max())
    rng = job_rng(SEED, "benchmark", "study2", label, epsilon)
    start = time.perf_counter()
    draw_and_measure(strata["cases"].to_numpy(), cal, measures, n_sets, rng, batch=batch)
    out["draw_measure_s"] = time.perf_counter() - start
    out["worker_peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epsilons", type=int, default=None, help="subsample the grid")
    parser.add_argument(
        "--epsilon-values",
        type=float,
        nargs="+",
        default=None,
        help="run these epsilons instead of the grid",
    )
    entry = standin_config()["studies"]["standin"]
    parser.add_argument("--sets", type=int, default=entry["sets"], help="L per cell")
    parser.add_argument("--batch", type=int, default=entry["batch"])
    parser.add_argument("--workers", type=int, default=2)
    arms = [arm["name"] for arm in entry["arms"]]
    parser.add_argument("--mechanisms", nargs="+", default=arms, help="arms of the study")
    parser.add_argument("--json", type=Path, default=None, help="also write the rows here")
    args = parser.parse_args(argv)

    grid = list(grid_from_config(entry["epsilons"], entry["map_epsilons"])[0])
    if args.epsilons is not None and args.epsilons < len(grid):
        picks = np.unique(np.round(np.linspace(0, len(grid) - 1, args.epsilons)).astype(int))
        grid = [grid[k] for k in picks]
    if args.epsilon_values is not None:
        grid = sorted(args.epsilon_values)
    # slow calibrations (exact) first so the pool's two workers finish together
    tasks = [(m, e, args.sets, args.batch) for m in args.mechanisms[::-1] for e in grid]
    print(
        f"# Study 2 stand-in benchmark: {len(grid)} epsilons x L = {args.sets} x "
        f"{len(args.mechanisms)} mechanisms, {args.workers} workers, "
        f"{platform.processor() or platform.machine()}"
    )
    start = time.perf_counter()
    with multiprocessing.get_context("fork").Pool(args.workers, initializer=_init_worker) as pool:
        rows = []
        for row in pool.imap_unordered(run_task, tasks):
            rows.append(row)
            print(json.dumps(row), flush=True)
    wall = time.perf_counter() - start
    frame = pd.DataFrame(rows)
    parent_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    totals = {
        "wall_s": wall,
        "calibration_cpu_s": float(frame["calibration_s"].sum()),
        "draw_measure_cpu_s": float(frame.get("draw_measure_s", pd.Series(dtype=float)).sum()),
        "largest_worker_peak_rss_mib": float(frame.get("worker_peak_rss_mib").max()),
        "parent_peak_rss_mib": parent_rss,
        "failed_calibrations": int(frame.get("error", pd.Series(dtype=object)).notna().sum()),
    }
    by_mech = frame.groupby("mechanism")[["calibration_s", "draw_measure_s"]].sum()
    print("# CPU seconds by mechanism\n" + by_mech.round(1).to_string())
    print("# totals " + json.dumps(totals))
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"totals": totals, "rows": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
