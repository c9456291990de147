"""Wall time and peak memory of the default Study 1 on this machine, beside its floor.

Run from the repository root::

    .venv/bin/python benchmarks/study1.py [--cores 2] [--configfile FILE]
                                          [--job-structure bundled|split]

Runs Snakemake in a throw-away copy of the project up to ``results/study1/summary.parquet``
(figures and maps excluded), with the given config (default: the paper's settings in
config/config.yaml) and job structure (default: bundled, as `make` runs it). Reports the
wall time, the peak resident memory of any single process (the largest single process of
the timed run: Snakemake or one of its jobs; 2 jobs run at once on 2 cores) and the job
count, and, measured in the same run, the *floor*: the time NumPy alone takes to draw as
many gamma variates as the study draws (scenarios x mechanisms x epsilons x L x I), plus
Snakemake's fixed start-up (a dry run of the same DAG).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import yaml
from workflow_timing import REPO, copy_project, timed_snakemake


def gamma_floor(n_draws: int, rng: np.random.Generator, batch: int = 10_000_000) -> float:
    """Seconds NumPy takes to draw ``n_draws`` gamma variates (shapes around 1-100)."""
    start = time.perf_counter()
    left = n_draws
    while left > 0:
        size = min(batch, left)
        rng.gamma(rng.uniform(1, 100, size), 1.0)
        left -= size
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--configfile", default=None, help="extra config (e.g. the test one)")
    parser.add_argument("--keep-summary", default=None, help="copy the summary Parquet here")
    parser.add_argument("--job-structure", choices=["bundled", "split"], default="bundled")
    args = parser.parse_args()

    config = yaml.safe_load((REPO / "config/config.yaml").read_text())
    extra = ["--configfile", args.configfile] if args.configfile else []
    extra += ["--config", f"job_structure={args.job_structure}"]
    if args.configfile:
        override = yaml.safe_load(Path(args.configfile).read_text())
        config["study1"].update(override.get("study1", {}))
    s1 = config["study1"]
    sys.path.insert(0, str(REPO / "src"))
    from dpcounts.studies.study1 import Study1Design

    design = Study1Design.from_config(s1)
    n_cells = 3085
    n_gammas = (
        len(s1["scenarios"]) * len(design.arms) * len(design.epsilons) * design.datasets * n_cells
    )

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        copy_project(work)
        target = "results/study1/summary.parquet"
        # Inputs of Study 1 first (truth), so the timing is the study itself.
        timed_snakemake(
            work, "results/data/truth_35_44.parquet", "--cores", str(args.cores), *extra
        )
        startup, _ = timed_snakemake(work, target, "-n", "--cores", str(args.cores), *extra)
        wall, peak_kib = timed_snakemake(work, target, "--cores", str(args.cores), *extra)
        kinds = ("scenario_", "datasets_", "score_")  # every job of Study 1 but its summary
        n_jobs = sum(
            p.name.startswith(kinds) for p in (work / "logs/benchmarks/study1").glob("*.tsv")
        )
        if args.keep_summary:
            shutil.copy2(work / target, args.keep_summary)
    floor = gamma_floor(n_gammas, np.random.default_rng(0))

    print("| quantity | value |")
    print("|---|---|")
    print(f"| jobs ({args.job_structure}: scenarios, data sets and scores) | {n_jobs} |")
    print(f"| gamma variates drawn | {n_gammas:,} |")
    print(f"| wall time, {args.cores} cores | {wall:.1f} s |")
    print(f"| peak memory of the largest process | {peak_kib / 1024:.0f} MiB |")
    print(f"| floor: NumPy gamma draws alone | {floor:.1f} s |")
    print(f"| Snakemake start-up (dry run of the DAG) | {startup:.1f} s |")
    print(f"| wall / (floor + start-up) | {wall / (floor + startup):.2f} |")


if __name__ == "__main__":
    main()
