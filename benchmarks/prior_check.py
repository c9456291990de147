"""Cost of the release's count-fit check (``dpcounts.release.prior_check``, issue #36).

Run from the repository root::

    .venv/bin/python benchmarks/prior_check.py [--counties 315 3142 31420] [--repeats 3]

On the synthetic national table of ``benchmarks/national_table.py`` (320 strata a county:
315 counties give 100,800 strata, 3,142 give 1,005,440, 31,420 give 10,054,400), it times
``prior_reproduces_counts(count, population, prior_rate)`` as the release calls it, on
three tables of each size (and ``group_fit``, the groups' test, with the age groups):

* ``national``: the table itself; the prior is the national rate of each age group, so the
  strata share few distinct (population, rate) pairs;
* ``distinct-poisson``: the worst case for the per-pair computation, every population made
  fractional (times uniform(0.9, 1.1)), so every stratum has its own Poisson null;
* ``distinct-binomial``: whole populations with a rate of their own (the national rate times
  gamma(30) / 30 noise), so every stratum has its own binomial null (only up to
  ``--max-distinct`` strata).

Each table runs in a child process that holds only its three arrays; it reports the best
of ``--repeats`` times of the check, the memory the check adds (the process's resident
high-water mark during the first check, reset beforehand through /proc/self/clear_refs,
less its resident size before it), and, measured in the same process, two floors: reading
the three arrays (``np.load``) and NumPy drawing one Poisson count per stratum
(``rng.poisson(population * prior_rate)``). ``--before REF`` also times the check as it was
at git revision REF (up to ``--before-max`` strata). Prints a markdown table and writes the
rows as JSON to ``--json`` (default ``results/benchmarks/prior_check.json``).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
FILES = ("count", "population", "prior_rate")


def tables(counties: int, max_distinct: int):
    """(kind, arrays) for each table of this size."""
    from national_table import national_arrays

    numbers = national_arrays(counties)
    count = numbers["count"]
    population = numbers["population"].astype(float)
    rate = numbers["prior_rate"]
    yield "national", (count, population, rate)
    rng = np.random.default_rng(counties)
    yield "distinct-poisson", (count, population * rng.uniform(0.9, 1.1, count.size), rate)
    if count.size <= max_distinct:
        noisy = np.minimum(rate * rng.gamma(30.0, 1.0 / 30.0, count.size), 0.5)
        yield "distinct-binomial", (count, population, noisy)


def resident() -> tuple[float, float]:
    """(resident, high-water mark) of this process, in bytes."""
    status = Path("/proc/self/status").read_text().splitlines()
    value = {line.split(":")[0]: int(line.split()[1]) * 1024 for line in status if "kB" in line}
    return value["VmRSS"], value["VmHWM"]


def measure(function, repeats: int) -> dict:
    """Best time of ``function()`` and the memory its first run adds."""
    Path("/proc/self/clear_refs").write_text("5")  # reset the high-water mark
    before, _ = resident()
    start = time.perf_counter()
    result = function()
    times = [time.perf_counter() - start]
    _, peak = resident()
    for _ in range(repeats - 1):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return {"seconds": min(times), "added_mib": (peak - before) / 2**20, "result": result}


def child(folder: Path, repeats: int, before: Path | None) -> dict:
    import pandas as pd
    from national_table import AGES

    from dpcounts.release import prior_check

    def load():
        return [np.load(folder / f"{name}.npy") for name in FILES]

    count, population, rate = load()
    row = {"strata": int(count.size)}
    check = measure(lambda: prior_check.prior_reproduces_counts(count, population, rate), repeats)
    row["check_s"], row["check_added_mib"] = check["seconds"], check["added_mib"]
    row["passes"] = check["result"] is None
    # the groups' test (issue #50) as the release runs it for a prior by age group: the
    # table's order is county, then age, race, sex and origin
    from national_table import ORIGINS, RACES, SEXES

    ages = np.arange(count.size) // (RACES * SEXES * ORIGINS) % AGES
    group = measure(lambda: prior_check.group_fit(count, population, rate, ages), repeats)
    row["group_check_s"] = group["seconds"]
    row["group_passes"] = group["result"] is None
    if before is not None:
        spec = importlib.util.spec_from_file_location("prior_check_before", before)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        old = measure(lambda: module.prior_reproduces_counts(count, population, rate), 1)
        row["before_s"], row["before_added_mib"] = old["seconds"], old["added_mib"]
        assert (old["result"] is None) == row["passes"]
    row["read_s"] = measure(load, repeats)["seconds"]
    rng = np.random.default_rng(0)
    row["poisson_s"] = measure(lambda: rng.poisson(population * rate), repeats)["seconds"]
    mu, n = prior_check._null(population, rate)
    row["null"] = "poisson" if n is None else "binomial"
    key = mu if n is None else population + 1j * rate
    row["distinct_pairs"] = int(len(pd.factorize(key)[1]))
    row["enumerated_strata"] = int(np.count_nonzero(mu <= prior_check.ENUMERATED_MEAN))
    row["resident_mib"] = resident()[0] / 2**20
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--counties", type=int, nargs="+", default=[315, 3142, 31420])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--max-distinct", type=int, default=2_000_000)
    parser.add_argument("--before", default=None, help="also time the check at this git ref")
    parser.add_argument("--before-max", type=int, default=200_000)
    parser.add_argument("--json", type=Path, default=REPO / "results/benchmarks/prior_check.json")
    parser.add_argument("--child", type=Path, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--child-before", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        print(json.dumps(child(args.child, args.repeats, args.child_before)))
        return

    rows = []
    print(
        "| strata | table | null | distinct pairs | check | group check | added memory | "
        "read floor | poisson floor | check / poisson |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        before = None
        if args.before:
            before = tmp / "prior_check_before.py"
            source = f"{args.before}:src/dpcounts/release/prior_check.py"
            before.write_text(subprocess.check_output(["git", "show", source], cwd=REPO, text=True))
        for counties in args.counties:
            for kind, arrays in tables(counties, args.max_distinct):
                for name, values in zip(FILES, arrays, strict=True):
                    np.save(tmp / f"{name}.npy", values)
                command = [sys.executable, __file__, "--child", str(tmp)]
                command += ["--repeats", str(args.repeats)]
                if before is not None and arrays[0].size <= args.before_max:
                    command += ["--child-before", str(before)]
                done = subprocess.run(
                    command, check=True, capture_output=True, text=True, env=dict(os.environ)
                )
                row = {"counties": counties, "table": kind} | json.loads(done.stdout)
                rows.append(row)
                old = (
                    f" (before: {row['before_s']:.2f} s, {row['before_added_mib']:.0f} MiB)"
                    if "before_s" in row
                    else ""
                )
                print(
                    f"| {row['strata']:,} | {kind} | {row['null']} | {row['distinct_pairs']:,} | "
                    f"{row['check_s']:.3f} s{old} | {row['group_check_s']:.3f} s | "
                    f"{row['check_added_mib']:.0f} MiB | "
                    f"{row['read_s']:.3f} s | {row['poisson_s']:.3f} s | "
                    f"{row['check_s'] / row['poisson_s']:.1f}x |",
                    flush=True,
                )
    args.json.parent.mkdir(parents=True, exist_ok=True)
    meta = {"command": " ".join(sys.argv), "cpus": os.cpu_count(), "load": os.getloadavg()}
    args.json.write_text(json.dumps({"meta": meta, "rows": rows}, indent=2) + "\n")
    print(f"\nwritten {args.json}")


if __name__ == "__main__":
    main()
