"""Time the attribute check (``dpcounts.release.attribute_check``) on tables of n strata.

    .venv/bin/python benchmarks/attribute_check.py [--strata 100000 1000000]

Each table is counties x 20 ages, Poisson counts whose rate a public urban flag doubles.
For each size it times the check of the public flag (passes: a split that stays, or none)
and of two attributes computed from the counts, ``count < 3`` and a copy of the count
(refused, after every redraw), and writes the rows to ``--json`` (default
``results/benchmarks/attribute_check.json``). It also writes, under ``calibration``, on
``--tables`` of ``tests/test_release_attribute_check.py``'s simulated tables (40 counties x 4
ages, a public urban flag doubling the rate), how many tables each attribute splits cleanly
and the range of the share of redraws in which the split stays (the module's docstring
quotes them): the public flag, and a mark ``count < 10``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from dpcounts.release import attribute_check
from dpcounts.release.attribute_check import attribute_separation

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))


def table(n: int, rng: np.random.Generator):
    counties = max(n // 20, 2)
    keys = pd.DataFrame({"county": np.repeat(np.arange(counties), 20)[:n].astype(str),
                         "age": np.tile(np.arange(20), counties)[:n]})  # fmt: skip
    urban = pd.Series(keys["county"].astype(int) % 3 == 0)
    population = rng.integers(100, 5000, n).astype(float)
    counts = rng.poisson(population * 0.001 * (1 + urban))
    return keys, urban, population, counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--strata", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--tables", type=int, default=60)
    parser.add_argument("--json", type=Path,
                        default=REPO / "results/benchmarks/attribute_check.json")  # fmt: skip
    args = parser.parse_args()
    rows = []
    for n in args.strata:
        keys, urban, population, counts = table(n, np.random.default_rng(0))
        for name, values in {"urban": urban, "below_3": pd.Series(counts < 3),
                             "copy": pd.Series(counts)}.items():  # fmt: skip
            start = time.perf_counter()
            found = attribute_separation(keys, pd.DataFrame({name: values}), counts, population)
            row = {"strata": n, "attribute": name, "refused": found is not None,
                   "seconds": round(time.perf_counter() - start, 3)}  # fmt: skip
            rows.append(row)
            print(json.dumps(row), flush=True)
    result = {"timing": rows, "calibration": calibration(args.tables)}
    print(json.dumps(result["calibration"]), flush=True)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=1) + "\n")


def calibration(tables: int) -> dict:
    """Per attribute, the tables it splits cleanly and the redraws' share that keep it."""
    from test_release_attribute_check import separation
    from test_release_attribute_check import table as test_table

    refuse_at = attribute_check.PERSISTS
    attribute_check.PERSISTS = 1.0  # measure every split's share, refuse none
    try:
        found = {"urban": [], "count_below_10": []}
        for seed in range(tables):
            frame = test_table(np.random.default_rng(seed))
            for name, values in (("urban", frame["urban"]),
                                 ("count_below_10", frame["count"] < 10)):  # fmt: skip
                split = separation(frame, **{name: values})
                if split is not None:
                    found[name].append(split.persists)
    finally:
        attribute_check.PERSISTS = refuse_at
    return {name: {"tables": tables, "split": len(shares),
                   "persists_min": min(shares, default=None),
                   "persists_max": max(shares, default=None),
                   "refused": sum(share <= refuse_at for share in shares)}
            for name, shares in found.items()}  # fmt: skip


if __name__ == "__main__":
    main()
