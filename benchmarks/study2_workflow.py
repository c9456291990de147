"""Wall time and peak memory of a Study 2 scenario run by the real workflow.

Run from the repository root::

    .venv/bin/python benchmarks/study2_workflow.py                      # the stand-in
    .venv/bin/python benchmarks/study2_workflow.py --scenario pennlc
    .venv/bin/python benchmarks/study2_workflow.py --configfile config/test/config.yaml

Runs Snakemake in a throw-away copy of the project up to
``results/studies/<scenario>/summary.parquet`` (figures excluded) at the default config
(20 epsilons x L = 1,000 x 4 calibrations; the stand-in is switched on for this run),
after building the scenario's strata, which are the study's input. Reports the wall time,
the peak resident memory of the largest single process (Snakemake or one of its jobs),
the number of calibration and simulation jobs with their median and largest time and
memory (Snakemake's ``benchmark:`` files), Snakemake's fixed start-up (a dry run of the same
DAG) and the calibrations' own seconds as the jobs logged them.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
from pathlib import Path

import pandas as pd
from workflow_timing import copy_project, timed_snakemake


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", choices=["standin", "pennlc"], default="standin")
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--configfile", default=None, help="extra config (e.g. the test one)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        work = copy_project(Path(tmp))
        override = work / "config" / "benchmark.yaml"
        override.write_text(f"studies:\n  {args.scenario}:\n    enabled: true\n")
        extra = [str(Path(args.configfile).resolve())] if args.configfile else []
        configs = ["--configfile", *extra, str(override)]
        common = ["--cores", str(args.cores), *configs]
        strata = f"results/studies/{args.scenario}/strata.parquet"
        target = f"results/studies/{args.scenario}/summary.parquet"
        timed_snakemake(work, strata, *common)
        startup, _ = timed_snakemake(work, target, "-n", *common)
        wall, peak_kib = timed_snakemake(work, target, *common)
        results = work / "results" / "studies" / args.scenario
        n_calibrate = len(list((results / "calibrations").rglob("*.parquet")))
        n_simulate = len(list((results / "metrics").rglob("*.parquet")))
        calibration_seconds = _logged_calibration_seconds(work / "logs" / "studies" / args.scenario)
        jobs = _job_benchmarks(work / "logs" / "benchmarks" / "studies" / args.scenario)

    print(f"# Study 2, {args.scenario}, {args.cores} cores (real Snakemake run)", file=sys.stderr)
    print("| quantity | value |")
    print("|---|---|")
    print(f"| calibration jobs / simulation jobs | {n_calibrate} / {n_simulate} |")
    print(f"| wall time, {args.cores} cores | {wall:.1f} s |")
    print(f"| peak memory of the largest process | {peak_kib / 1024:.0f} MiB |")
    print(f"| Snakemake start-up (dry run of the DAG) | {startup:.1f} s |")
    for kind, row in jobs.iterrows():
        print(
            f"| {kind} job: median / largest seconds, largest memory | {row['median_s']:.1f} / "
            f"{row['max_s']:.1f} s, {row['max_rss']:.0f} MB |"
        )
    for label, seconds in sorted(calibration_seconds.items()):
        print(f"| calibration CPU, {label} (sum over epsilons, from job logs) | {seconds:.1f} s |")


def _job_benchmarks(folder: Path) -> pd.DataFrame:
    """Median and largest wall seconds and largest RSS per job kind (calibrate, simulate)."""
    rows = []
    for path in folder.glob("*.tsv"):
        row = pd.read_csv(path, sep="\t").iloc[0]
        rows.append({"kind": path.name.split("_")[0], "s": row["s"], "max_rss": row["max_rss"]})
    frame = pd.DataFrame(rows)
    return frame.groupby("kind").agg(
        median_s=("s", "median"), max_s=("s", "max"), max_rss=("max_rss", "max")
    )


def _logged_calibration_seconds(logs: Path) -> dict[str, float]:
    """Seconds per arm from the calibration jobs' logs ('...: 12.34 s, median a')."""
    totals: dict[str, float] = {}
    for log in logs.glob("calibrate_*.log"):
        mechanism = log.name[len("calibrate_") :].rsplit("_", 1)[0]
        seconds = [float(m) for m in re.findall(r": ([0-9.]+) s, median a", log.read_text())]
        totals[mechanism] = totals.get(mechanism, 0.0) + sum(seconds)
    return totals


if __name__ == "__main__":
    main()
