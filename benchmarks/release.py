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
"""

from __future__ import annotations

import argparse
import math
import os
import tempfile
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
    args = parser.parse_args()

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


if __name__ == "__main__":
    main()
