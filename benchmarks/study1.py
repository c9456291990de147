"""Wall time and peak memory of the default Study 1 on this machine, beside its floor.

Run from the repository root::

    .venv/bin/python benchmarks/study1.py [--cores 2] [--configfile FILE]

Runs Snakemake in a throw-away copy of the project up to ``results/study1/summary.parquet``
(figures and maps excluded), with the given config (default: the paper's settings in
config/config.yaml). Reports the wall time, the peak resident memory of any single process
(getrusage of the children: Snakemake and its jobs) and the job count, and, measured in the
same run, the *floor*: the time NumPy alone takes to draw as many gamma variates as the
study draws (scenarios x mechanisms x epsilons x L x I), plus Snakemake's fixed start-up
(a dry run of the same DAG).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import yaml

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def copy_project(dest: Path) -> None:
    for name in ("Snakefile", "environment.yml", "requirements.txt"):
        shutil.copy2(REPO / name, dest / name)
    for folder in ("workflow", "config"):
        shutil.copytree(REPO / folder, dest / folder)
    os.symlink(REPO / "data", dest / "data")


def snakemake(work: Path, *args: str) -> float:
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    start = time.perf_counter()
    subprocess.run(
        [str(BIN / "snakemake"), *args], cwd=work, check=True, env=env, capture_output=True
    )
    return time.perf_counter() - start


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
    args = parser.parse_args()

    config = yaml.safe_load((REPO / "config/config.yaml").read_text())
    extra = ["--configfile", args.configfile] if args.configfile else []
    if args.configfile:
        override = yaml.safe_load(Path(args.configfile).read_text())
        config["study1"].update(override.get("study1", {}))
    s1 = config["study1"]
    sys.path.insert(0, str(REPO / "src"))
    from dpsynth.design import epsilon_grid

    n_eps = len(epsilon_grid(**s1["epsilons"], extra=s1["map_epsilons"]))
    n_cells = 3085
    n_gammas = len(s1["scenarios"]) * len(s1["mechanisms"]) * n_eps * s1["datasets"] * n_cells

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        copy_project(work)
        target = "results/study1/summary.parquet"
        # Inputs of Study 1 first (truth), so the timing is the study itself.
        snakemake(work, "results/data/truth_35_44.parquet", "--cores", str(args.cores), *extra)
        startup = snakemake(work, target, "-n", "--cores", str(args.cores), *extra)
        before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        wall = snakemake(work, target, "--cores", str(args.cores), *extra)
        peak_kib = max(before, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
        n_jobs = len(list((work / "results/study1/scores").rglob("*.parquet")))
    floor = gamma_floor(n_gammas, np.random.default_rng(0))

    print("| quantity | value |")
    print("|---|---|")
    print(f"| score jobs | {n_jobs} |")
    print(f"| gamma variates drawn | {n_gammas:,} |")
    print(f"| wall time, {args.cores} cores | {wall:.1f} s |")
    print(f"| peak memory of one process | {peak_kib / 1024:.0f} MiB |")
    print(f"| floor: NumPy gamma draws alone | {floor:.1f} s |")
    print(f"| Snakemake start-up (dry run of the DAG) | {startup:.1f} s |")
    print(f"| wall / (floor + start-up) | {wall / (floor + startup):.2f} |")


if __name__ == "__main__":
    main()
