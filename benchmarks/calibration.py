"""Time of every calibration method of the truncated mechanism on Study 2's stand-in.

Run from the repository root::

    .venv/bin/python benchmarks/calibration.py                          # the full grid
    .venv/bin/python benchmarks/calibration.py --strata /tmp/standin.parquet
    .venv/bin/python benchmarks/calibration.py --epsilon-values 0.01 1 --methods exact

Calibrates ``truncated`` with method paper, certified and exact (exact bivariate, the
"optimised" calibration) at every epsilon of the default Study 2 grid
(``epsilon_grid(0.01, 4.0, 20, [1.0, 4.0])``), on the 47,034 stand-in strata with the
modelled national prior (built as ``benchmarks/study2.py`` builds them, or read from
``--strata``, a parquet with columns cases, population and prior_rate), tail 1/I, exactly
as the study stage's calibration jobs do (``dpcounts.studies.stage.simulate.calibrate_arm``). One
process, one calibration at a time.

Prints a markdown table: seconds (wall) per method, the median shape a per method, and
the largest exact bivariate loss of the exact calibration over eps (<= 1 is the
guarantee); then the totals (wall and CPU seconds per method). The exact method's numba
kernel is compiled on its first call and cached on disk (``cache=True``): the first-call
time of this process (a cache load, or a compile when the cache is missing or stale) is
measured on a tiny instance before the grid and reported apart, and so is a compile from
scratch (a subprocess with an empty ``NUMBA_CACHE_DIR``); the grid's times exclude both.
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from dpcounts.design import epsilon_grid
from dpcounts.privacy.calibrate import calibrate
from dpcounts.privacy.exact_bivariate import bivariate_epsilon

METHODS = ["paper", "certified", "exact"]
FIRST_CALL = """
import time
import numpy as np
from dpcounts.privacy.exact_bivariate import bivariate_epsilon
start = time.perf_counter()
bivariate_epsilon(np.array([1.0, 2.0]), 10, np.array([3.0, 5.0]), np.array([1.0, 1.0]),
                  np.array([1, 2]), np.array([6, 8]))
print(time.perf_counter() - start)
"""


def load_strata(path: Path | None) -> pd.DataFrame:
    if path is not None:
        return pd.read_parquet(path, columns=["cases", "population", "prior_rate"])
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from study2 import build_standin  # benchmarks/study2.py, heavy

    _, strata, _ = build_standin()
    return strata


def first_call_seconds(fresh_cache: bool) -> float:
    """Seconds of a first kernel call in a new process (after the import), with the disk
    cache as it is, or with an empty cache directory (a compile from scratch)."""
    env = dict(os.environ)
    with tempfile.TemporaryDirectory() as cache_dir:
        if fresh_cache:
            env["NUMBA_CACHE_DIR"] = cache_dir
        out = subprocess.run(
            [sys.executable, "-c", FIRST_CALL], env=env, check=True, capture_output=True, text=True
        )
    return float(out.stdout.strip().splitlines()[-1])


def use_exact_module(path: Path) -> None:
    """Make ``calibrate(method='exact')`` call ``exact_bivariate_shapes`` from ``path``."""
    import importlib.util

    import dpcounts.privacy.calibrate as calibrate_module

    spec = importlib.util.spec_from_file_location("exact_bivariate_under_test", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    calibrate_module.exact_bivariate_shapes = module.exact_bivariate_shapes
    print(f"# exact method from {path}")


def timed(label: str, epsilon: float, strata: pd.DataFrame):
    """(calibration or error message, wall seconds, CPU seconds)."""
    wall, cpu = time.perf_counter(), time.process_time()
    try:
        cal = calibrate(
            "truncated",
            epsilon,
            int(strata["cases"].sum()),
            strata["population"].to_numpy(dtype=float),
            strata["prior_rate"].to_numpy(dtype=float),
            method=label.removeprefix("truncated_"),
            tail=1.0 / len(strata),
        )
    except (ValueError, RuntimeError) as error:
        cal = f"{type(error).__name__}: {error}"
    return cal, time.perf_counter() - wall, time.process_time() - cpu


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--strata", type=Path, default=None, help="stand-in strata parquet")
    parser.add_argument("--epsilon-values", type=float, nargs="+", default=None)
    parser.add_argument("--methods", nargs="+", choices=METHODS, default=METHODS)
    parser.add_argument(
        "--skip-compile", action="store_true", help="do not time a compile from scratch"
    )
    parser.add_argument(
        "--exact-module",
        type=Path,
        default=None,
        help="time the exact method of this copy of exact_bivariate.py instead (e.g. an "
        "older commit's, for a before/after comparison); the loss column still uses the "
        "current bivariate_epsilon",
    )
    args = parser.parse_args(argv)
    if args.exact_module is not None:
        use_exact_module(args.exact_module)

    grid = args.epsilon_values or epsilon_grid(0.01, 4.0, 20, [1.0, 4.0])
    strata = load_strata(args.strata)
    print(
        f"# Truncated calibrations on {len(strata):,} strata (y. = {int(strata['cases'].sum()):,})"
        f", {len(grid)} epsilons, {platform.machine()}, {os.cpu_count()} CPUs, "
        f"load average {os.getloadavg()[0]:.2f} at start"
    )
    # Numba: the first call of this process (cache load or compile), then the grid.
    start = time.perf_counter()
    bivariate_epsilon(
        np.array([1.0, 2.0]), 10, np.array([3.0, 5.0]), np.ones(2), np.array([1, 2]),
        np.array([6, 8]),
    )  # fmt: skip
    first_call = time.perf_counter() - start
    compile_s = None if args.skip_compile else first_call_seconds(fresh_cache=True)
    cached_s = first_call_seconds(fresh_cache=False)

    rows = []
    for epsilon in grid:
        row = {"eps": epsilon}
        for method in args.methods:
            cal, wall, cpu = timed(f"truncated_{method}", epsilon, strata)
            row[f"{method}_s"], row[f"{method}_cpu_s"] = wall, cpu
            if isinstance(cal, str):
                row[f"{method}_error"] = cal
                continue
            row[f"{method}_a_median"] = float(np.median(cal.a))
            if method == "exact":
                loss = bivariate_epsilon(
                    cal.a, cal.total, cal.population, cal.prior_rate, cal.lower, cal.upper
                )
                row["exact_worst_over_eps"] = float(loss.max() / epsilon)
        rows.append(row)
        print(f"#   eps={epsilon:g} done: " + ", ".join(
            f"{m} {row[f'{m}_s']:.2f} s" for m in args.methods
        ), flush=True)  # fmt: skip

    print()
    head = ["eps"] + [f"{m} s" for m in args.methods] + [f"median a {m}" for m in args.methods]
    if "exact" in args.methods:
        head.append("exact worst loss / eps")
    print("| " + " | ".join(head) + " |")
    print("|" + "|".join("---:" for _ in head) + "|")
    for row in rows:
        cells = [f"{row['eps']:g}"] + [f"{row[f'{m}_s']:.2f}" for m in args.methods]
        for m in args.methods:
            cells.append("error" if f"{m}_error" in row else f"{row[f'{m}_a_median']:.4g}")
        if "exact" in args.methods:
            worst = row.get("exact_worst_over_eps")
            cells.append("error" if worst is None else f"{worst:.10f}")
        print("| " + " | ".join(cells) + " |")
    print()
    for m in args.methods:
        wall = sum(r[f"{m}_s"] for r in rows)
        cpu = sum(r[f"{m}_cpu_s"] for r in rows)
        worst = max(r[f"{m}_s"] for r in rows)
        failed = [f"{r['eps']:g}" for r in rows if f"{m}_error" in r]
        print(
            f"- {m}: total {wall:.1f} s wall, {cpu:.1f} s CPU, slowest eps {worst:.2f} s, "
            f"failed at eps {failed or 'none'}"
        )
        for r in rows:
            if f"{m}_error" in r:
                print(f"  - eps {r['eps']:g}: {r[f'{m}_error'][:300]}")
    print(f"- numba first call in this process (before the grid): {first_call:.2f} s")
    print(f"- numba first call in a new process with the disk cache: {cached_s:.2f} s")
    if compile_s is not None:
        print(f"- numba first call in a new process, empty cache (compile): {compile_s:.2f} s")


if __name__ == "__main__":
    main()
