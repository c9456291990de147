"""Cost of the noise-aware posterior (``dpcounts.inference.posterior``, issue #54): what
``dpcounts estimate --method posterior`` and a ``--study`` release's utility report pay.

Run from the repository root::

    .venv/bin/python benchmarks/estimate.py [--counties 3 10 30] [--sets 5]

On the synthetic national table of ``benchmarks/national_table.py`` (320 strata a county:
3 counties give 960 strata, 10 give 3,200, 30 give 9,600), each mechanism is calibrated
with the overall rate as its prior (md: paper, pg and truncated: certified) at epsilon 1 a
set, ``--sets`` sets are drawn, and the posterior of every county's total
(:func:`~dpcounts.inference.posterior.group_posteriors`, then ``summarise``) is timed once,
in this process, after one warm-up call on the smallest table. It prints a markdown table
and writes the rows as JSON to ``--json`` (default ``results/benchmarks/estimate.json``):
mechanism, strata, sets, seconds, and seconds per 1,000 strata.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
MECHANISMS = (("md", "paper"), ("pg", "certified"), ("truncated", "certified"))


def time_posterior(counties: int, mechanism: str, method: str, sets: int, seed: int) -> dict:
    """One timed posterior of every county's total on the national table's first
    ``counties`` counties."""
    from national_table import national_arrays

    from dpcounts import calibrate, synthesize
    from dpcounts.inference.posterior import group_posteriors, summarise

    numbers = national_arrays(counties)
    y = numbers["count"].astype(np.int64)
    population = numbers["population"].astype(float)
    rate = np.full(y.size, y.sum() / population.sum())  # the overall rate
    cal = calibrate(mechanism, 1.0, int(y.sum()), population, rate, method=method)
    rng = np.random.default_rng(seed)
    drawn = synthesize(y, cal, sets, rng)
    codes = np.repeat(np.arange(counties), y.size // counties)
    people = np.bincount(codes, weights=population)
    start = time.perf_counter()
    laws = group_posteriors(cal, drawn, codes, 1.0, population)
    summarise(laws, people, 1e5, 0.9)
    seconds = time.perf_counter() - start
    return {"mechanism": mechanism, "strata": int(y.size), "sets": sets,
            "seconds": round(seconds, 3),
            "seconds_per_1000_strata": round(1000 * seconds / y.size, 4)}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--counties", type=int, nargs="+", default=[3, 10, 30])
    parser.add_argument("--sets", type=int, default=5)
    parser.add_argument("--json", type=Path, default=REPO / "results/benchmarks/estimate.json")
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    for mechanism, method in MECHANISMS:  # warm-up: numba and scipy's first calls
        time_posterior(min(args.counties), mechanism, method, args.sets, 0)
    rows = [time_posterior(c, m, method, args.sets, c) for c in args.counties
            for m, method in MECHANISMS]  # fmt: skip
    print("| mechanism | strata | sets | seconds | s per 1,000 strata |")
    print("|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['mechanism']} | {r['strata']:,} | {r['sets']} | {r['seconds']:.2f} | "
              f"{r['seconds_per_1000_strata']:.3f} |")  # fmt: skip
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
