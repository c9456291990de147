"""Cost of a release's guarantees: `dpcounts synthesize` beside the study sampler it replaced.

Run from the repository root::

    .venv/bin/python benchmarks/release.py [--sets 10] [--repeats 3]

On the shipped Pennsylvania strata (1,071 populated strata, 10,279 cases), for the
truncated and pg mechanisms with certified calibrations, it times, in one process:

* the *floor*: the study sampler built for the counts and drawing the sets
  with numpy's PCG64, i.e. what a release cost before issue #12;
* the release sampler: ``release_sampler`` (double-double weights, no FFT, rebuilt until its
  total-variation bound meets the target) drawing the same number of sets exactly, each from
  its own ChaCha20 stream;
* the whole ``dpcounts.release.build_release`` (reading, checks, sanitised prior, ledger,
  calibration, drawing, writing and installing the folders, the steward's summary plots).

Times are the best of ``--repeats`` runs (numba compilation is paid before timing).
Prints a markdown table with ratios to the floor.

With ``--national`` it times instead ``dpcounts synthesize`` as a process on the synthetic
national tables of ``benchmarks/national_table.py`` (10k, 100k, 1M strata of 20 age groups,
and 10,054,400 strata of single-year ages over two years; the public prior is the national
rate of each age), on the default path: the input's prior-rate column with its count-fit
check, no override, the default limits (``--tables`` picks some). For each run it prints
wall time, CPU time and peak memory (the process's own rusage) beside the release's
forecast (:func:`dpcounts.release.cost.estimate_cost` at the machine's speed measured
around the run), and the floor: NumPy drawing as many negative binomials (one per stratum
and set) in one process, and the ratio of the wall time to that floor divided by the
cores; then ``dpcounts verify`` of the 1M and 10M truncated releases. numba's kernels are
compiled before anything is timed (an untimed 10k release, and a 100k one of each
mechanism, whose parallel kernels the small table does not reach). The rows go to
``results/benchmarks/release_national.json`` (git-ignored; ``--out`` elsewhere).
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
from measure import run_measured
from mechanisms import best_time  # benchmarks/ is on the path when run as a script

from dpcounts.privacy.calibrate import calibrate
from dpcounts.release import ReleaseRequest, build_release
from dpcounts.release.randomness import RootKey
from dpcounts.sampling.release_mode import release_sampler
from dpcounts.sampling.study_mode import StudySampler

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--national", action="store_true", help="the national tables instead")
    parser.add_argument(
        "--tables",
        nargs="+",
        choices=list(TABLES),
        help="with --national: only these tables (default: all, up to 10,054,400 strata)",
    )
    parser.add_argument(
        "--runs",
        nargs="+",
        metavar="TABLE:MECHANISM:SETS",
        help="with --national: only these runs (e.g. 1M:truncated:10 10M:pg:1)",
    )
    parser.add_argument(
        "--out", type=Path, default=NATIONAL_RESULTS, help="with --national: the JSON written"
    )
    args = parser.parse_args()
    if args.national:
        national(args.tables, args.out, args.runs)
        return

    strata = pd.read_parquet(REPO / "data" / "pennlc_strata.parquet").query("population > 0")
    strata = strata.rename(columns={"cases": "count"})
    keys = ["county", "race", "sex", "age"]
    for key in keys:
        strata[key] = strata[key].astype(str)
    y = strata["count"].to_numpy(np.int64)
    population = strata["population"].to_numpy(float)
    groups = strata.groupby(["race", "sex", "age"], observed=True)
    rate = (groups["count"].transform("sum") / groups["population"].transform("sum")).to_numpy()
    epsilon_set, delta_set = 0.1, 1e-12 / args.sets
    target = delta_set / (1 + math.exp(epsilon_set))

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        os.environ["DPCOUNTS_LEDGER"] = str(tmp / "ledger.jsonl")
        strata[[*keys, "count", "population"]].to_csv(tmp / "pa.csv", index=False)
        print(f"pennLC: {y.size} strata, total {y.sum()}, {args.sets} sets, tv target {target:.2g}")
        print()
        print(
            "| mechanism | floor: study sampler | release sampler | ratio | whole release | ratio |"
        )
        print("|---|---|---|---|---|---|")
        for mechanism in ("truncated", "pg"):
            cal = calibrate(
                mechanism, epsilon_set, int(y.sum()), population, rate, method="certified"
            )
            root = RootKey.fresh()

            def floor(cal=cal):
                sampler = StudySampler(y, cal)
                sampler.draw(args.sets, np.random.default_rng(1))

            def release(cal=cal, root=root):
                sampler = release_sampler(y, cal, target)
                for k in range(args.sets):
                    sampler.draw(1, root.generator(f"set:{k}"))

            release()  # compile the release kernels (numba cache) before timing
            runs = iter(range(10**6))

            def whole(mechanism=mechanism, runs=runs):
                out = tmp / f"{mechanism}{next(runs)}"
                build_release(
                    ReleaseRequest(
                        input=tmp / "pa.csv",
                        out=out,
                        dataset="benchmark",
                        private_dir=tmp / f"{out.name}.keys",  # not the real home's
                        epsilon=0.2 + epsilon_set * args.sets,
                        mechanism=mechanism,
                        keys=tuple(keys),
                        strata="input",  # pennLC's strata with a population (README)
                        sets=args.sets,
                        sanitised_prior_by=("race", "sex", "age"),
                        prior_epsilon=0.2,
                        progress=False,
                    )
                )

            t_floor, t_release = best_time(floor, args.repeats), best_time(release, args.repeats)
            t_whole = best_time(whole, args.repeats)
            print(
                f"| {mechanism} certified | {t_floor:.2f} s | {t_release:.2f} s | "
                f"{t_release / t_floor:.1f}x | {t_whole:.2f} s | {t_whole / t_floor:.1f}x |"
            )


# --- the national table (issue #27) -------------------------------------------------------


def run(command: list[str], env: dict) -> tuple[float, float, float, int]:
    """(wall s, CPU s, peak resident GiB, exit code) of one process."""
    result = run_measured(command, env)
    code = result["code"]
    if code not in (0, 1, 2):  # 2: refused (the row says so)
        raise SystemExit(f"failed ({code}): {' '.join(command)}")
    return result["wall"], result["cpu"], result["peak_bytes"] / 2**30, code


def negative_binomial_floor(n: int, repeats: int = 3) -> float:
    """Seconds NumPy takes to draw n negative binomials in one process (best of repeats)."""
    rng = np.random.default_rng(0)
    shape, success = rng.uniform(0.5, 20.0, n), rng.uniform(0.2, 0.95, n)

    def draw():
        rng.negative_binomial(shape, success)

    return best_time(draw, repeats)


#: The national tables: name -> (counties, single-year ages or age groups, years).
TABLES = {
    "10k": (32, 20, 1),
    "100k": (315, 20, 1),
    "1M": (3142, 20, 1),
    "10M": (3142, 100, 2),
}
#: The runs of --national: (table, mechanism, sets); verify follows the truncated 1-set
#: release of the 1M and 10M tables.
RUNS = [
    ("10k", "truncated", 1),
    ("100k", "truncated", 1),
    ("100k", "truncated", 10),
    ("100k", "truncated", 100),
    ("1M", "truncated", 1),
    ("1M", "truncated", 10),
    ("1M", "pg", 1),
    ("1M", "pg", 10),
    ("10M", "truncated", 1),
    ("10M", "pg", 1),
]  # issue #36's targets: 1M in 20 s and 2.5 GiB (10 sets: 4 GiB), 10M in 90 s and 6 GiB
#: Where --national writes its rows (git-ignored, like every result).
NATIONAL_RESULTS = REPO / "results" / "benchmarks" / "release_national.json"


def forecast_of(frame: pd.DataFrame, mechanism: str, sets: int, epsilon: float, delta: float):
    """The release's public forecast (:func:`dpcounts.release.cost.estimate_cost`)."""
    from dpcounts.release.cost import estimate_cost

    per_set = epsilon / sets
    cal = calibrate(
        mechanism, per_set, int(frame["count"].sum()), frame["population"].to_numpy(float),
        frame["prior_rate"].to_numpy(float), method="certified",
    )  # fmt: skip
    return estimate_cost(cal, delta / sets / (1 + math.exp(per_set)), sets)


def national(
    only: list[str] | None = None, out: Path = NATIONAL_RESULTS, chosen: list[str] | None = None
) -> None:
    """Time ``dpcounts synthesize`` on the national tables, on the default path (the
    input's public prior-rate column and its count-fit check, no override, default
    limits), forecast beside measured; write the rows to ``out`` (JSON)."""
    import json

    import numba
    from national_table import keys_of, national_table

    from dpcounts.release.request import DEFAULT_MAX_MEMORY, DEFAULT_MAX_MINUTES
    from dpcounts.sampling.tree_build import machine_rate

    cores = numba.get_num_threads()
    delta, epsilon = 1e-12, 1.0
    runs = [r for r in RUNS if only is None or r[0] in only]
    if chosen:
        runs = [(t, m, int(k)) for t, m, k in (c.split(":") for c in chosen)]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        env = dict(os.environ, XDG_DATA_HOME=str(tmp / "home"), DPCOUNTS_LEDGER=str(tmp / "l"))
        paths = {}
        for name in dict.fromkeys(r[0] for r in [("10k", "", 0), ("100k", "", 0), *runs]):
            counties, ages, years = TABLES[name]
            path = tmp / f"national_{name}.parquet"
            national_table(counties, ages=ages, years=years).to_parquet(path)
            paths[name] = path

        def synthesize(name, mechanism, sets, record=True):
            counties, ages, years = TABLES[name]
            out = tmp / f"{mechanism}_{name}_{sets}"
            command = [
                sys.executable, "-m", "dpcounts", "synthesize", "--input", str(paths[name]),
                "--keys", *keys_of(counties, ages, years), "--strata", "input",
                "--prior-rate-column", "prior_rate", "--mechanism", mechanism,
                "--prior-source", "the benchmark table's national rates by age (synthetic)",
                "--epsilon", str(epsilon), "--sets", str(sets), "--dataset",
                f"national_{name}", "--out", str(out),
                "--private-dir", str(tmp / f"{out.name}.private"), "--quiet", "--force",
            ]  # fmt: skip
            load = os.getloadavg()[0]  # the machine is shared: its load, beside the times
            rate_before = machine_rate()
            # a steward's home and ledger of its own: the tables overlap (the same counties),
            # which one home's ledger refuses under another dataset name
            home = tmp / f"{out.name}.home"
            own = dict(env, XDG_DATA_HOME=str(home), DPCOUNTS_LEDGER=str(home / "ledger"))
            wall, cpu, peak, code = run(command, own)
            rate_after = machine_rate()  # the machine's speed around the run, its best
            rate = [max(b, a) for b, a in zip(rate_before, rate_after, strict=True)]
            if not record:
                return out
            frame = pd.read_parquet(paths[name], columns=["count", "population", "prior_rate"])
            forecast = forecast_of(frame, mechanism, sets, epsilon, delta)
            floor = negative_binomial_floor(len(frame) * sets)
            row = {
                "strata": len(frame),
                "deaths": int(frame["count"].sum()),
                "mechanism": mechanism,
                "sets": sets,
                "path": "default (input prior-rate column, count-fit check, default limits)",
                "refused": code != 0,
                "wall_s": wall,
                "cpu_s": cpu,
                "peak_gib": peak,
                "forecast_s": forecast.seconds(*rate),
                "forecast_gib": forecast.bytes / 2**30,
                # the forecast's public quantities (benchmarks/fit_forecast.py fits to them)
                "multiply_adds": forecast.multiply_adds,
                "entries": forecast.entries,
                "walked": forecast.walked,
                "machine_rate": rate[0],  # on every core
                "machine_rate_serial": rate[1],  # on one
                "max_memory_gib": DEFAULT_MAX_MEMORY / 2**30,
                "nb_floor_s": floor,
                "cores": cores,
                "spilled": bool(forecast.spilled),
                "load_average": load,
                "max_minutes": DEFAULT_MAX_MINUTES,
            }
            rows.append(row)
            print(
                f"| {row['strata']:,} | {row['deaths']:,} | {mechanism} | {sets} | "
                + ("refused | " if row["refused"] else "")
                + f"{wall:.1f} s | {cpu:.1f} s | {peak:.2f} GiB | "
                f"{row['forecast_s']:.1f} s ({row['forecast_s'] / wall:.2f}x), "
                f"{row['forecast_gib']:.2f} GiB ({row['forecast_gib'] / peak:.2f}x) | "
                f"{floor:.3g} s | {wall / (floor / cores):.0f}x |",
                flush=True,
            )
            return out

        print(
            f"national tables, {cores} cores, default --max-memory "
            f"{DEFAULT_MAX_MEMORY / 2**30:g} GiB\n\n"
            "| strata | deaths | mechanism | sets | wall | CPU | peak | forecast (/ measured) | "
            "floor (1 process) | wall / (floor / cores) |\n"
            "|---|---|---|---|---|---|---|---|---|---|",
            flush=True,
        )
        # numba's cache, outside the timings: the small table's serial kernels, then the
        # parallel ones (strata beyond a threshold) and the multi-set draw of each mechanism
        synthesize("10k", "truncated", 1, record=False)
        for mechanism in dict.fromkeys(m for _, m, _ in runs):
            synthesize("100k", mechanism, 10, record=False)
        for name, mechanism, sets in runs:
            release = synthesize(name, mechanism, sets)
            if name in ("1M", "10M") and (mechanism, sets) == ("truncated", 1):
                wall, cpu, peak, _ = run(
                    [sys.executable, "-m", "dpcounts", "verify", str(release)], env
                )
                rows.append(
                    {"verify": str(len(pd.read_parquet(paths[name], columns=["count"]))),
                     "wall_s": wall, "cpu_s": cpu, "peak_gib": peak}
                )  # fmt: skip
                print(f"| `dpcounts verify` of it | | | | {wall:.1f} s | {cpu:.1f} s | "
                      f"{peak:.2f} GiB | | | |", flush=True)  # fmt: skip
                shutil.rmtree(release, ignore_errors=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(rows, indent=1) + "\n")
    print(f"\nwrote {out.relative_to(REPO) if out.is_relative_to(REPO) else out}")


if __name__ == "__main__":
    main()
