"""Speed of the exact discrete Laplace sampler, alone and in Study 1's geometric baseline.

Run from the repository root::

    .venv/bin/python benchmarks/discrete_laplace.py [--repeats 3]

Prints (1) the time per draw of :func:`sample_discrete_laplace` for batches of 10^5 at
several scales, with NumPy's PCG64 and, if ``randomgen`` is installed, ChaCha(rounds=20);
(2) Study 1's use before (floating-point sampler: difference of two NumPy geometric draws,
one call per dataset) and now (exact sampler; the geometric baseline draws the noise of
all datasets of an epsilon in one call), and the ratio: the noise alone and one default
``score_datasets`` job of the geometric baseline (100 datasets of 3,085 counties x the 25
epsilons of config/config.yaml), the sanitised state prior's noise alone (49 state totals
per dataset and epsilon) and in a ``pg_state_sanitised`` job (20 datasets, to keep it
short). The counties are synthetic (random populations, 49 states); only the sizes matter.
"""

from __future__ import annotations

import argparse
from fractions import Fraction
from pathlib import Path

import numpy as np
import yaml
from mechanisms import best_time  # benchmarks/ is on the path when run as a script

import dpcounts.baselines.geometric as geometric
import dpcounts.privacy.sanitised_prior as sanitised_prior
import dpcounts.studies.study1 as study1
from dpcounts.data.scenarios import Scenario
from dpcounts.privacy.discrete_laplace import SENSITIVITY, sample_discrete_laplace, scale_for
from dpcounts.studies.study1 import Geography, Study1Design, score_datasets

#: Study 1's design as config/config.yaml states it (grid, datasets per job, prior share).
DESIGN = Study1Design.from_config(
    yaml.safe_load((Path(__file__).parents[1] / "config/config.yaml").read_text())["study1"]
)
N_COUNTIES = 3085
N_DATASETS = DESIGN.datasets_per_job
N_SANITISED = 20


def float_geometric_noise(epsilon, size, rng, sensitivity=SENSITIVITY):
    """The former sampler: difference of two floating-point NumPy geometric draws."""
    p_success = -np.expm1(-epsilon / sensitivity)
    return rng.geometric(p_success, size) - rng.geometric(p_success, size)


def former_release_each(datasets, epsilon, rng):
    """Study 1's former geometric step: one ``geometric_release`` call per dataset."""
    return np.stack([geometric.geometric_release(y, epsilon, 1, rng)[0] for y in datasets])


def generators():
    yield "PCG64", np.random.default_rng(0)
    try:
        import randomgen
    except ImportError:
        return
    yield "ChaCha20", np.random.Generator(randomgen.ChaCha(seed=0, rounds=20))


def synthetic_study1(rng):
    population = np.round(rng.lognormal(9.0, 1.3, N_COUNTIES)) + 100
    rate = rng.gamma(20.0, 0.002 / 20.0, N_COUNTIES)
    states = np.array(["NM", "NY"] + [f"S{k:02d}" for k in range(47)])
    state = states[rng.integers(0, states.size, N_COUNTIES)]
    state[:2] = ["NM", "NY"]
    urban = population > np.median(population)
    total = int(round((population * rate).sum()))
    scenario = Scenario(number=0, population=population, rate=rate, total=total)
    datasets = rng.multinomial(total, population * rate / (population * rate).sum(), N_DATASETS)
    return scenario, Geography(state=state, urban=urban), datasets


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    print("| generator | scale | microseconds per draw (10^5 draws) |")
    print("|---|---|---|")
    scales = {
        "1": Fraction(1),
        "2/0.3": scale_for(0.3, 2),
        "2/3": Fraction(2, 3),
        "200 (eps 0.01)": scale_for(0.01, 2),
        "2000 (eps 0.001)": scale_for(0.001, 2),
        "10^4": Fraction(10**4),
        "2*10^5 (eps 1e-5: numerator > 2**63)": scale_for(1e-5, 2),
    }
    for name, rng in generators():
        for label, scale in scales.items():
            seconds = best_time(
                lambda scale=scale, rng=rng: sample_discrete_laplace(scale, 10**5, rng),
                args.repeats,
            )
            print(f"| {name} | {label} | {seconds / 1e5 * 1e6:.2f} |")

    rng = np.random.default_rng(1)
    scenario, geo, datasets = synthetic_study1(rng)
    ids = np.arange(N_DATASETS)
    epsilons = list(DESIGN.epsilons)
    exact = (geometric.geometric_noise, study1.geometric_release_each)
    versions = {
        "float (former)": (float_geometric_noise, former_release_each),
        "exact": exact,
    }
    results = {}
    try:
        for label, (noise, release_each) in versions.items():
            geometric.geometric_noise = sanitised_prior.geometric_noise = noise
            study1.geometric_release_each = release_each
            if release_each is former_release_each:  # one call per dataset

                def draw_noise(noise=noise):
                    return [noise(e, (1, N_COUNTIES), rng) for e in epsilons for _ in ids]
            else:  # one call per epsilon

                def draw_noise(noise=noise):
                    return [noise(e, (N_DATASETS, N_COUNTIES), rng) for e in epsilons]

            results[label, "noise"] = best_time(draw_noise, args.repeats)
            results[label, "job"] = best_time(
                lambda: score_datasets(
                    scenario,
                    geo,
                    datasets,
                    ids,
                    "geometric",
                    epsilons,
                    rng,
                    prior_budget_fraction=DESIGN.prior_budget_fraction,
                ),
                args.repeats,
            )
            results[label, "prior"] = best_time(
                lambda noise=noise: [
                    noise(DESIGN.prior_budget_fraction * e, 49, rng) for e in epsilons for _ in ids
                ],
                args.repeats,
            )
            results[label, "sanitised job"] = best_time(
                lambda: score_datasets(
                    scenario,
                    geo,
                    datasets[:N_SANITISED],
                    ids[:N_SANITISED],
                    "pg_state_sanitised",
                    epsilons,
                    rng,
                    prior_budget_fraction=DESIGN.prior_budget_fraction,
                ),
                args.repeats,
            )
    finally:
        geometric.geometric_noise = sanitised_prior.geometric_noise = exact[0]
        study1.geometric_release_each = exact[1]
    print()
    print(
        f"Study 1 use: {N_DATASETS} datasets x {len(epsilons)} epsilons "
        f"({min(epsilons):g} to {max(epsilons):g})"
    )
    print("| what | float (former) s | exact s | ratio |")
    print("|---|---|---|---|")
    for key, what in (
        ("noise", f"geometric noise, {N_DATASETS} x {N_COUNTIES} draws per eps"),
        ("job", "score_datasets(..., 'geometric', ...): one job"),
        (
            "prior",
            f"geometric_noise({DESIGN.prior_budget_fraction:g} eps, 49), once per dataset and "
            "eps (state prior)",
        ),
        (
            "sanitised job",
            f"score_datasets(..., 'pg_state_sanitised', ...), {N_SANITISED} datasets",
        ),
    ):
        before, after = results["float (former)", key], results["exact", key]
        print(f"| {what} | {before:.3f} | {after:.3f} | {after / before:.1f} |")


if __name__ == "__main__":
    main()
