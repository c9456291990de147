"""Fit the release's time forecast to the national benchmark's rows.

Run from the repository root, after ``benchmarks/release.py --national``::

    .venv/bin/python benchmarks/fit_forecast.py [results/benchmarks/release_national.json]

:meth:`dpcounts.release.cost.Cost.seconds` forecasts a release's wall time as

    start + (share x multiply-adds + per entry x tree entries + per step x leaf steps)
            / rate on every core
          + (per stratum + per stratum and set x sets) x strata / rate on one core

from public quantities only (the convolutions' multiply-adds, the tree's entries and the
leaves' walked steps of :func:`~dpcounts.release.cost.estimate_cost`, the strata, the
sets) and the machine's convolution rates measured around each run: the compiled build's
work (convolutions, entries, steps) at the rate on every core, the work per stratum and
per stratum and set at the rate on one. This script fits those
six constants to the
rows the benchmark wrote (each row's measured wall time, its forecast's quantities and its
rate) by non-negative least squares on relative errors, the convolutions' share at least
1 (they cannot run faster than the rate measured with their own kernel), and prints them beside the
constants in ``release/cost.py``, with each row's forecast over measured under both. The
fit is in sample: rerun the benchmark to see the new constants on other runs.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
from scipy.optimize import nnls

from dpcounts.release import cost

REPO = Path(__file__).resolve().parents[1]
NATIONAL_RESULTS = REPO / "results" / "benchmarks" / "release_national.json"
#: The constants, in the order of the fit's columns.
NAMES = (
    "_CONVOLUTION_SHARE",
    "_WORK_PER_ENTRY",
    "_WORK_PER_STEP",
    "_WORK_PER_STRATUM",
    "_WORK_PER_STRATUM_SET",
    "_START_SECONDS",
)


def columns(row: dict) -> np.ndarray:
    """A run's terms of the forecast, each to be multiplied by its constant."""
    parallel, serial = row["machine_rate"], row["machine_rate_serial"]
    return np.array(
        [
            row["multiply_adds"] / parallel,
            row["entries"] / parallel,
            row.get("walked", 0.0) / parallel,
            row["strata"] / serial,
            row["strata"] * row["sets"] / serial,
            1.0,
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", nargs="?", type=Path, default=NATIONAL_RESULTS)
    args = parser.parse_args()
    rows = [r for r in json.loads(args.results.read_text()) if "strata" in r]
    rows = [r for r in rows if not r["refused"] and "machine_rate_serial" in r]
    if len(rows) < len(NAMES):
        raise SystemExit(
            f"{args.results}: {len(rows)} runs with the forecast's quantities; expected at "
            f"least {len(NAMES)} (run benchmarks/release.py --national first)"
        )
    terms = np.stack([columns(r) for r in rows])
    wall = np.array([r["wall_s"] for r in rows])
    # the convolutions run at best at the rate measured with their own kernel: their
    # share is at least 1 (the national tables alone cannot tell it from the entries')
    floor = np.zeros(len(NAMES))
    floor[0] = 1.0
    rest = wall - terms @ floor
    fitted, _ = nnls(terms / wall[:, None], rest / wall)  # relative errors
    fitted += floor
    now = np.array([getattr(cost, name) for name in NAMES])
    print("| constant | in cost.py | fitted |\n|---|---:|---:|")
    for name, old, new in zip(NAMES, now, fitted, strict=True):
        print(f"| `{name}` | {old:,.4g} | {new:,.4g} |")
    print(
        "\n| strata | mechanism | sets | wall | forecast now (/ wall) | fitted (/ wall) |\n"
        "|---:|---|---:|---:|---:|---:|"
    )
    for row, term, seconds in zip(rows, terms, wall, strict=True):
        old, new = float(term @ now), float(term @ fitted)
        print(
            f"| {row['strata']:,} | {row['mechanism']} | {row['sets']} | {seconds:.1f} s | "
            f"{old:.1f} s ({old / seconds:.2f}x) | {new:.1f} s ({new / seconds:.2f}x) |"
        )


if __name__ == "__main__":
    main()
