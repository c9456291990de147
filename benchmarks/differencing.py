"""Cost and outcome of the differencing attack on suppressed tables
(``dpcounts.attack.differencing``, issue #53).

Run from the repository root::

    .venv/bin/python benchmarks/differencing.py [--counties 3000] [--max-lps 20] [--seed 0]
        [--workers 1] [--out results/benchmarks/differencing.json]

It times :func:`feasible_ranges` (default margins: every key's and every pair of keys'
totals; the CDC WONDER rule, counts 1 to 9 hidden) on

* ``pennlc``: ``data/pennlc_strata.parquet`` (county x race x sex x age, ``cases``), with
  the zeros shown (the CDC rule), with the zeros hidden too, and with single-in-margin
  complementary suppression;
* ``homicide_1980``: ``data/ncovr_homicides.csv`` (decade 1980, one key ``fips``), the
  state totals published (as the study ``homicide_1980`` of config/config.yaml reads it),
  and the state totals with the national total;
* ``synthetic``: a national-size table of ``--counties`` counties x 2 races x 2 sexes x 9
  age groups (108,000 strata for 3,000 counties), deaths Poisson with mean 3 x a county
  size (log-normal, sd 1) x race (1, 0.35) x sex (1, 0.9) x age (exp of -2.5 .. 1.5),
  drawn from ``--seed``; the per-cell LPs of its one large component beyond the blocks'
  small LPs are budgeted by ``--max-lps`` (the rest sampled, ``rng`` from ``--seed``);
  ``--workers`` processes share its blocks.

Prints a markdown table and writes the rows as JSON to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from dpcounts.attack.differencing import default_margins, feasible_ranges
from dpcounts.baselines.suppression import SuppressionRule

REPO = Path(__file__).resolve().parents[1]


def synthetic_table(counties: int, seed: int) -> tuple[np.ndarray, pd.DataFrame]:
    """(counts, keys) of the synthetic national table (module docstring)."""
    rng = np.random.default_rng(seed)
    size = np.exp(rng.normal(0.0, 1.0, counties))
    race, sex = np.array([1.0, 0.35]), np.array([1.0, 0.9])
    age = np.exp(np.linspace(-2.5, 1.5, 9))
    mean = 3.0 * np.einsum("c,r,s,a->crsa", size, race, sex, age)
    counts = rng.poisson(mean).ravel()
    index = np.indices(mean.shape)
    keys = pd.DataFrame(
        {name: index[k].ravel() for k, name in enumerate(("county", "race", "sex", "age"))}
    )
    return counts, keys


def run(name: str, counts, keys, margins=None, rule=None, **options) -> dict:
    rule = rule or SuppressionRule()
    published = default_margins(list(keys.columns)) if margins is None else margins
    mask = rule.suppress(counts, keys, published)
    start = time.perf_counter()
    result = feasible_ranges(counts, mask, keys, margins, rule=rule, **options)
    seconds = time.perf_counter() - start
    summary = result.summary()
    primary = rule.primary(counts)[result.cells]
    if np.any(result.status != "exact"):
        primary[:] = False  # a share of the exact and the sampled cells together is biased
    row = {
        "table": name,
        "strata": int(counts.size),
        "suppressed": int(mask.sum()),
        "primary": int(rule.primary(counts).sum()),
        "margins": "default" if margins is None else [list(m) for m in margins],
        "rule": {
            "low": rule.low,
            "high": rule.high,
            "show_zeros": rule.show_zeros,
            "complementary": rule.complementary,
        },
        "seconds": seconds,
        "summary": summary,
        # the primary cells' share pinned (the complementary cells' counts are above high)
        "pinned_primary": float(np.mean(result.width[primary] == 0)) if primary.any() else None,
        "meta": result.meta,
    }

    def share(key):
        value = summary[key]
        if value["low"] == value["high"]:
            return f"{value['estimate']:.3f}"
        return f"{value['estimate']:.3f} [{value['low']:.3f}, {value['high']:.3f}]"

    print(
        f"| {name} | {row['strata']:,} | {row['suppressed']:,} | {summary['exact']:,} | "
        f"{summary['sampled']:,} | {share('pinned')} | {share('within_one')} | "
        f"{share('mean_width')} | {result.lps:,} | {seconds:.1f} s |",
        flush=True,
    )
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--counties", type=int, default=3000)
    parser.add_argument("--max-lps", type=int, default=20)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=REPO / "results/benchmarks/differencing.json")
    args = parser.parse_args()

    print(
        "| table | strata | suppressed | exact | sampled | pinned | within one (width <= 2) | "
        "mean width | LPs | wall |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    rows = []
    penn = pd.read_parquet(REPO / "data/pennlc_strata.parquet")
    counts = penn["cases"].to_numpy()
    keys = penn[["county", "race", "sex", "age"]]
    rows.append(run("pennlc", counts, keys))
    rows.append(run("pennlc, zeros hidden", counts, keys, rule=SuppressionRule(show_zeros=False)))
    complement = SuppressionRule(complementary="single-in-margin")
    rows.append(run("pennlc, single-in-margin", counts, keys, rule=complement))

    homicide = pd.read_csv(REPO / "data/ncovr_homicides.csv", dtype={"fips": str})
    homicide = homicide[homicide["decade"] == 1980].reset_index(drop=True)
    counts = homicide["homicides"].to_numpy()
    keys = homicide[["fips", "state"]]
    rows.append(run("homicide_1980, state totals", counts, keys, [("state",)]))
    rows.append(run("homicide_1980, state and US totals", counts, keys, [("state",), ()]))

    counts, keys = synthetic_table(args.counties, args.seed)
    rng = np.random.default_rng(args.seed)
    rows.append(
        run(
            f"synthetic, {args.counties:,} counties",
            counts,
            keys,
            max_lps=args.max_lps,
            rng=rng,
            workers=args.workers,
        )
    )

    args.out.parent.mkdir(parents=True, exist_ok=True)
    meta = {"command": " ".join(sys.argv), "cpus": os.cpu_count(), "load": os.getloadavg()}
    meta["seconds"] = sum(row["seconds"] for row in rows)
    args.out.write_text(json.dumps({"meta": meta, "rows": rows}, indent=2) + "\n")
    print(f"\nwritten {args.out}")


if __name__ == "__main__":
    main()
