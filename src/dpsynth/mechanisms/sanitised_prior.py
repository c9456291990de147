"""Sanitised state prior (seed 000 eq 19) with an explicit budget split.

State prior rates lambda0*_s = (sum_{j in s} y_j + e_s) / sum_{j in s} n_j, with e the
two-sided geometric noise on the vector of state totals (Delta = 2: moving one event
between two states changes two totals by one; within a state, none). That costs
eps_prior. The noisy rates are public, so the PG calibration with them (budget
eps_synth = eps - eps_prior) is post-processing of a DP output; by sequential composition
the whole release is eps-DP. Noisy totals below ``MIN_STATE_COUNT`` are raised to it
(post-processing) so every prior rate is positive.
"""

from __future__ import annotations

import numpy as np

from dpsynth.calibration import Calibration
from dpsynth.mechanisms.geometric import geometric_noise
from dpsynth.privacy.calibrate import calibrate

MIN_STATE_COUNT = 0.5  # floor on a noisy state total: keeps lambda0* > 0


def noisy_state_rates(y, state, population, epsilon_prior: float, rng) -> np.ndarray:
    """Per-cell prior rate lambda0*_{s_i} from geometric-noised state totals (eq 19)."""
    y = np.asarray(y)
    state = np.asarray(state)
    population = np.asarray(population, dtype=float)
    if not (y.shape == state.shape == population.shape) or y.ndim != 1:
        raise ValueError("y, state and population must be 1-D arrays of the same length")
    labels, codes = np.unique(state, return_inverse=True)
    totals = np.bincount(codes, weights=y, minlength=labels.size)
    pops = np.bincount(codes, weights=population, minlength=labels.size)
    noisy = totals + geometric_noise(epsilon_prior, labels.size, rng)
    rates = np.maximum(noisy, MIN_STATE_COUNT) / pops
    return rates[codes]


def sanitised_prior_calibration(
    y,
    state,
    population,
    epsilon: float,
    epsilon_prior: float,
    rng: np.random.Generator,
    *,
    mechanism: str = "pg",
    method: str = "certified",
    **calibrate_kwargs,
) -> tuple[np.ndarray, Calibration]:
    """Split eps = eps_prior + eps_synth; return (public noisy prior rates, calibration).

    The calibration is ``calibrate(mechanism, eps - eps_prior, y., population,
    noisy_rates, method=method, ...)``.
    """
    if not (0 < epsilon_prior < epsilon):
        raise ValueError(
            f"epsilon_prior must lie strictly between 0 and epsilon={epsilon}, "
            f"got {epsilon_prior!r}"
        )
    rates = noisy_state_rates(y, state, population, epsilon_prior, rng)
    cal = calibrate(
        mechanism,
        epsilon - epsilon_prior,
        int(np.sum(y)),
        population,
        rates,
        method=method,
        **calibrate_kwargs,
    )
    return rates, cal
