"""Exact audit of every calibration method on random small instances.

The certified calibrations are proven (docs/privacy.md) and tests/test_privacy_sweep.py
checks them; this script audits the papers' nominal calibrations and the exact-bivariate
one on the same kind of sweep and prints, per mechanism and method, the largest realised
epsilon relative to the nominal one, with the instance where it occurs.

    .venv/bin/python benchmarks/audit_sweep.py [--instances 300] [--seed 2024] [--write]

``--write`` stores the worst ratio per nominal method, with the instance that gives it,
in ``src/dpcounts/privacy/audited_ratios.json``: release manifests quote these ratios, and
tests/test_manifest.py re-audits each stored instance to check the number.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from dpcounts import calibrate
from dpcounts.privacy.audit import audit_worst_case

MAX_TOTAL = {2: 30, 3: 14, 4: 10}
METHODS = {"pg": ("paper", "exact", "certified"), "truncated": ("paper", "exact", "certified")}


def random_instance(rng):
    n_cells = int(rng.integers(2, 5))
    total = int(rng.integers(1, MAX_TOTAL[n_cells] + 1))
    population = rng.lognormal(3.0, 1.5, n_cells)
    prior_rate = rng.lognormal(-2.0, 1.0, n_cells)
    epsilon = float(rng.choice([0.1, 0.5, 1.0, 2.0, 4.0]) * rng.uniform(0.8, 1.2))
    tail = float(rng.choice([0.3, 0.1, 0.01]))
    # Scale the rates so the prior expected total is near y. (feasible truncation bounds).
    truncated_rate = prior_rate * total * rng.uniform(0.5, 2.0) / (population * prior_rate).sum()
    return n_cells, total, population, prior_rate, truncated_rate, epsilon, tail


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instances", type=int, default=300)
    parser.add_argument("--seed", type=int, default=2024)
    parser.add_argument("--write", action="store_true", help="store the worst ratios")
    args = parser.parse_args()
    instances = {}
    rng = np.random.default_rng(args.seed)
    worst: dict[tuple[str, str], tuple[float, str]] = {}
    counts: dict[tuple[str, str], list[int]] = {}
    start = time.perf_counter()
    for _ in range(args.instances):
        n_cells, total, population, prior_rate, truncated_rate, epsilon, tail = random_instance(rng)
        for mechanism, methods in METHODS.items():
            rate = truncated_rate if mechanism == "truncated" else prior_rate
            extra = {"tail": tail} if mechanism == "truncated" else {}
            for method in methods:
                key = (mechanism, method)
                tally = counts.setdefault(
                    key, [0, 0, 0, {2: 0, 3: 0, 4: 0}]
                )  # audited, refused, over eps
                try:
                    cal = calibrate(
                        mechanism, epsilon, total, population, rate, method=method, **extra
                    )
                except (ValueError, RuntimeError):
                    tally[1] += 1
                    continue
                case = audit_worst_case(cal)
                tally[0] += 1
                ratio = case.epsilon / epsilon
                tally[2] += ratio > 1 + 1e-9
                tally[3][n_cells] += ratio > 1 + 1e-9
                if ratio > worst.get(key, (-1.0, ""))[0]:
                    where = (
                        f"I={n_cells} y.={total} eps={epsilon:.3g} "
                        f"n={np.round(population, 2).tolist()} "
                        f"lambda0={np.round(rate, 4).tolist()} a={np.round(cal.a, 3).tolist()}"
                        + (
                            f" L={cal.lower.tolist()} U={cal.upper.tolist()}"
                            if cal.truncated
                            else ""
                        )
                        + f" worst y={case.y.tolist()} x={case.x.tolist()} z={case.z.tolist()}"
                    )
                    worst[key] = (ratio, where)
                    instances[key] = dict(
                        epsilon=epsilon,
                        total=total,
                        population=population.tolist(),
                        prior_rate=rate.tolist(),
                        **extra,
                    )
    print(f"{args.instances} instances, seed {args.seed}, {time.perf_counter() - start:.1f} s")
    print(
        f"{'mechanism':<10} {'method':<10} {'audited':>7} {'refused':>7} {'over eps':>8} "
        f"{'max realised/nominal':>21}  over eps at I=2/3/4"
    )
    for key in sorted(counts):
        audited, refused, over, by_cells = counts[key]
        ratio = worst.get(key, (float("nan"), ""))[0]
        print(
            f"{key[0]:<10} {key[1]:<10} {audited:>7} {refused:>7} {over:>8} {ratio:>21.4f}  "
            f"{by_cells[2]}/{by_cells[3]}/{by_cells[4]}"
        )
    if args.write:
        nominal = sorted(k for k in worst if k[1] != "certified")
        out = {
            "command": f"benchmarks/audit_sweep.py --instances {args.instances} "
            f"--seed {args.seed} --write",
            "ratios": {f"{m}/{k}": worst[(m, k)][0] for m, k in nominal},
            "instances": {f"{m}/{k}": instances[(m, k)] for m, k in nominal},
        }
        path = Path(__file__).resolve().parents[1] / "src/dpcounts/privacy/audited_ratios.json"
        path.write_text(json.dumps(out, indent=2, sort_keys=True) + "\n")
        print(f"wrote {path}")
    for key in sorted(worst):
        print(
            f"\n{key[0]} / {key[1]}: max realised/nominal {worst[key][0]:.4f} at\n  {worst[key][1]}"
        )


if __name__ == "__main__":
    main()
