"""Study 1's heterogeneity scenarios (Quick (2021), Section 3.2) and the datasets drawn from them.

Scenario numbers follow the paper:

==========  =====================  ==========================
scenario    population sizes n_i   event rates lambda_i
==========  =====================  ==========================
1           equal: n./I            equal: y./n.
2           real (modelled 35-44)  equal: y./n.
3           equal: n./I            real (the Study-1 truth)
4           real (modelled 35-44)  real (the Study-1 truth)
==========  =====================  ==========================

In every scenario the L datasets are y ~ Mult(y., n lambda / sum n lambda): Poisson counts
with means n_i lambda_i conditioned on their total y..
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

SCENARIOS = {
    1: ("equal", "equal"),
    2: ("real", "equal"),
    3: ("equal", "real"),
    4: ("real", "real"),
}


@dataclass(frozen=True)
class Scenario:
    """Populations and true rates of one scenario (arrays in county order)."""

    number: int
    population: np.ndarray
    rate: np.ndarray
    total: int

    @property
    def cell_probabilities(self) -> np.ndarray:
        mean = self.population * self.rate
        return mean / mean.sum()


def make_scenario(number: int, population, true_rate, total: int) -> Scenario:
    """Scenario ``number`` (1-4) from the real populations and the true rates.

    Equal populations are n./I; equal rates are the national rate y./n. of the real
    populations, so every scenario has the same n. and the same total y..
    """
    if number not in SCENARIOS:
        raise ValueError(f"scenario must be one of {sorted(SCENARIOS)}, got {number!r}")
    population = np.asarray(population, dtype=float)
    true_rate = np.asarray(true_rate, dtype=float)
    if population.shape != true_rate.shape or population.ndim != 1:
        raise ValueError("population and true_rate must be 1-D arrays of the same length")
    if np.any(population <= 0) or np.any(true_rate <= 0):
        raise ValueError("populations and true rates must be positive")
    sizes, rates = SCENARIOS[number]
    n_total = population.sum()
    n = np.full_like(population, n_total / population.size) if sizes == "equal" else population
    lam = np.full_like(true_rate, total / n_total) if rates == "equal" else true_rate
    return Scenario(number=number, population=n, rate=lam, total=int(total))


def draw_datasets(scenario: Scenario, size: int, rng: np.random.Generator) -> np.ndarray:
    """``size`` datasets y ~ Mult(y., n lambda / sum n lambda): int array (size, I)."""
    return rng.multinomial(scenario.total, scenario.cell_probabilities, size=size)
