"""Time the edit loop, ``make test-fast``'s lane, on one process and on one per core.

    .venv/bin/python benchmarks/test_lane.py [--workers 1 2]

runs the fast lane (``-m "not slow and not process"``, in process) once per worker count
given, in that order, and writes for each its wall and CPU seconds (the pytest processes'
own, children included), the tests passed and failed, to ``--json`` (default
``results/benchmarks/test_lane.json``), with the wall ratio of each run to the first. The
first run of a fresh checkout also compiles numba's kernels into their cache (about 35 s
once): run it twice, or read the second. It fails when a run has a failing test.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LANE = ("-m", "not slow and not process")


def run_lane(workers: int) -> dict:
    """One run of the fast lane with ``workers`` processes (1: pytest alone, no xdist)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *LANE]
    if workers > 1:
        command += ["-n", str(workers)]
    done = subprocess.run(
        command, cwd=REPO, env=dict(os.environ, DPCOUNTS_TEST_LANE="fast"),
        capture_output=True, text=True,
    )  # fmt: skip
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    summary = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else done.stderr
    counts = {word: int(n) for n, word in re.findall(r"(\d+) (passed|failed|error)", summary)}
    return {
        "workers": workers,
        "wall_s": round(wall, 1),
        "cpu_s": round(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, 1),
        "passed": counts.get("passed", 0),
        "failed": counts.get("failed", 0) + counts.get("error", 0),
        "returncode": done.returncode,
        "summary": summary,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--json", type=Path, default=REPO / "results/benchmarks/test_lane.json")
    args = parser.parse_args()
    rows = []
    for workers in args.workers:
        row = run_lane(workers)
        row["wall_ratio_to_first"] = round(row["wall_s"] / rows[0]["wall_s"], 3) if rows else 1.0
        rows.append(row)
        print(json.dumps(row), flush=True)
    result = {"cores": os.cpu_count(), "load_average": os.getloadavg(), "runs": rows}
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=1) + "\n")
    if any(row["returncode"] != 0 for row in rows):
        sys.exit("a run of the fast lane failed: " + "; ".join(r["summary"] for r in rows))


if __name__ == "__main__":
    main()
