"""Cost of a release's guarantees: `dpsynth synthesize` beside the study sampler it replaced.

Run from the repository root::

    .venv/bin/python benchmarks/release.py [--sets 10] [--repeats 3]

On the shipped Pennsylvania strata (1,071 populated strata, 10,279 cases), for the
truncated and pg mechanisms with certified calibrations, it times, in one process:

* the *floor*: the default-mode (study) sampler built for the counts and drawing the sets
  with numpy's PCG64, i.e. what a release cost before issue #12;
* the release sampler: ``release_sampler`` (double-double weights, no FFT, rebuilt until its
  total-variation bound meets the target) drawing the same number of sets exactly, each from
  its own ChaCha20 stream;
* the whole ``dpsynth.release.build_release`` (reading, checks, sanitised prior, ledger,
  calibration, drawing, writing and installing the folders, the steward's summary plots).

Times are the best of ``--repeats`` runs (numba compilation is paid before timing).
Prints a markdown table with ratios to the floor.

With ``--national`` it times instead ``dpsynth synthesize`` as a process on the synthetic
national table of ``benchmarks/national_table.py`` (1,005,440 strata, about 3 million
deaths; the public prior is the national rate of each age group): 1 and 10 sets for
``truncated`` and ``pg`` (certified), a scaling table at 10k, 100k and 1M strata, and
``dpsynth verify`` of the 1M release. For each run it prints wall time, CPU time and peak
memory (the process's own rusage), the forecast ``dpsynth calibrate`` shows for it, and
the floor: NumPy drawing as many negative binomials (one per stratum and set) in one
process, and the ratio of the wall time to that floor divided by the cores the run had.
"""

from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
from mechanisms import best_time  # benchmarks/ is on the path when run as a script

from dpsynth.privacy.calibrate import calibrate
from dpsynth.release import ReleaseRequest, build_release
from dpsynth.release.randomness import RootKey
from dpsynth.sampling.conditioned import ConditionedSampler, release_sampler

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--national", action="store_true", help="the national table instead")
    args = parser.parse_args()
    if args.national:
        national()
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
        os.environ["DPSYNTH_LEDGER"] = str(tmp / "ledger.jsonl")
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
                sampler = ConditionedSampler(y, cal)
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


def run(command: list[str], env: dict) -> tuple[float, float, float]:
    """(wall s, CPU s, peak resident GiB) of one process."""
    start = time.perf_counter()
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) not in (0, 1):
        raise SystemExit(f"failed ({status}): {' '.join(command)}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 2**20


def negative_binomial_floor(n: int, repeats: int = 3) -> float:
    """Seconds NumPy takes to draw n negative binomials in one process (best of repeats)."""
    rng = np.random.default_rng(0)
    shape, success = rng.uniform(0.5, 20.0, n), rng.uniform(0.2, 0.95, n)

    def draw():
        rng.negative_binomial(shape, success)

    return best_time(draw, repeats)


def national() -> None:
    import numba
    from national_table import KEYS, national_table

    from dpsynth.release.design import estimate_cost
    from dpsynth.sampling.tree_build import machine_rate

    cores = numba.get_num_threads()
    delta = 1e-12
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        env = dict(os.environ, XDG_DATA_HOME=str(tmp / "home"), DPSYNTH_LEDGER=str(tmp / "l"))
        tables = {}
        for counties in (32, 315, 3142):
            frame = national_table(counties)
            path = tmp / f"national_{counties}.parquet"
            frame.to_parquet(path)
            tables[counties] = (path, frame)
        print(
            f"national table: {len(tables[3142][1]):,} strata, "
            f"{int(tables[3142][1]['count'].sum()):,} deaths; {cores} cores\n"
        )
        rate = machine_rate()

        def synthesize(counties, mechanism, sets, epsilon=1.0, show=True):
            path, frame = tables[counties]
            out = tmp / f"{mechanism}_{counties}_{sets}"
            command = [
                sys.executable, "-m", "dpsynth", "synthesize", "--input", str(path),
                "--keys", *KEYS, "--strata", "input", "--prior-rate-column", "prior_rate",
                "--prior-is-public-i-am-sure", "--mechanism", mechanism,
                "--epsilon", str(epsilon), "--sets", str(sets), "--dataset", path.stem,
                "--out", str(out), "--private-dir", str(tmp / f"{out.name}.private"),
                "--quiet", "--max-memory", "16", "--max-minutes", "60", "--force",
            ]  # fmt: skip
            wall, cpu, peak = run(command, env)
            per_set = epsilon / sets
            cal = calibrate(
                mechanism, per_set, int(frame["count"].sum()),
                frame["population"].to_numpy(float), frame["prior_rate"].to_numpy(float),
                method="certified",
            )  # fmt: skip
            forecast = estimate_cost(cal, delta / sets / (1 + math.exp(per_set)), sets)
            floor = negative_binomial_floor(len(frame) * sets)
            rows.append(
                f"| {len(frame):,} | {int(frame['count'].sum()):,} | {mechanism} | {sets} | "
                f"{wall:.1f} s | {cpu:.1f} s | {peak:.2f} GiB | "
                f"{forecast.seconds(rate):.1f} s, {forecast.bytes / 2**30:.2f} GiB | "
                f"{floor:.3g} s | {wall / (floor / cores):.0f}x |"
            )
            if show:
                print(rows[-1], flush=True)
            return out

        print(
            "| strata | deaths | mechanism | sets | wall | CPU | peak | forecast | "
            "floor (1 process) | wall / (floor / cores) |"
        )
        print("|---|---|---|---|---|---|---|---|---|---|")
        synthesize(32, "truncated", 1, show=False)  # numba's cache, outside the timings
        rows.clear()
        for counties in (32, 315):
            synthesize(counties, "truncated", 1)
        release = synthesize(3142, "truncated", 1)
        for mechanism, sets in (("truncated", 10), ("pg", 1), ("pg", 10)):
            synthesize(3142, mechanism, sets)
        wall, cpu, peak = run([sys.executable, "-m", "dpsynth", "verify", str(release)], env)
        print(
            f"\n`dpsynth verify` of the 1,005,440-strata truncated release: {wall:.1f} s "
            f"wall, {cpu:.1f} s CPU, {peak:.2f} GiB peak"
        )


if __name__ == "__main__":
    main()
