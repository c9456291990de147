"""Time a real Snakemake run in a throw-away copy of the project (shared by the benchmarks).

The copy is made by the workflow tests' own helper (``tests/workflow_helpers.py``), so the
benchmarks run exactly what the tests run.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from workflow_helpers import BIN, REPO, copy_project

__all__ = ["BIN", "REPO", "copy_project", "single_thread_env", "timed_snakemake"]

# Runs a command and prints the peak resident memory of its process tree's largest member,
# so that the measurement covers that one run only.
PEAK_RSS = (
    "import resource, subprocess, sys; subprocess.run(sys.argv[1:], check=True, "
    "capture_output=True); print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
)


def single_thread_env() -> dict[str, str]:
    """This environment with one BLAS/OpenMP thread per process and the environment's
    ``bin`` (snakemake's) first on PATH: how every benchmark runs Snakemake."""
    return dict(
        os.environ,
        OPENBLAS_NUM_THREADS="1",
        OMP_NUM_THREADS="1",
        MKL_NUM_THREADS="1",
        PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
    )


def timed_snakemake(work: Path, *args: str) -> tuple[float, int]:
    """Wall seconds and peak KiB (largest single process) of one Snakemake run in ``work``."""
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", PEAK_RSS, str(BIN / "snakemake"), *args],
        cwd=work,
        check=True,
        env=single_thread_env(),
        capture_output=True,
        text=True,
    )
    return time.perf_counter() - start, int(done.stdout.split()[-1])
