"""Sanitised state prior (Quick (2021), eq 19) with an explicit budget split.

State prior rates lambda0*_s = (sum_{j in s} y_j + e_s) / sum_{j in s} n_j, with e the
two-sided geometric noise on the vector of state totals (Delta = 2: moving one event
between two states changes two totals by one; within a state, none). That costs
eps_prior. The noisy rates are public, so the PG calibration with them (budget
eps_synth = eps - eps_prior) is post-processing of a DP output; by sequential composition
the whole release is eps-DP. Noisy totals below ``MIN_STATE_COUNT`` are raised to it
(post-processing) so every prior rate is positive.

:func:`sanitised_group_prior` is the release version (``dpcounts synthesize``): integer
group totals, the exact discrete Laplace sampler, a record of what it spent, and no noise
(and no budget) when there is a single group, whose total is public.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dpcounts.calibration import Calibration
from dpcounts.privacy.calibrate import calibrate
from dpcounts.privacy.discrete_laplace import SENSITIVITY, geometric_noise

MIN_STATE_COUNT = 0.5  # floor on a noisy state total: keeps lambda0* > 0


def check_prior_share(epsilon: float, epsilon_prior: float) -> None:
    """Refuse (ValueError) a prior's share of the budget outside (0, ``epsilon``): the
    sanitised prior spends ``epsilon_prior`` of the total and the synthesis the rest."""
    if not (0 < epsilon_prior < epsilon):
        raise ValueError(
            f"epsilon_prior must lie strictly between 0 and epsilon={epsilon}, "
            f"got {epsilon_prior!r}"
        )


@dataclass(frozen=True)
class StateGroups:
    """The public grouping of cells into states, computed once for many datasets:
    ``codes`` (each cell's state, 0 .. S - 1 in the order of ``numpy.unique``), the
    number of states and each state's population."""

    codes: np.ndarray
    n_states: int
    population: np.ndarray

    @classmethod
    def of(cls, state, population) -> StateGroups:
        """The grouping of 1-D ``state`` labels with the cells' ``population``."""
        state = np.asarray(state)
        population = np.asarray(population, dtype=float)
        if state.shape != population.shape or state.ndim != 1:
            raise ValueError("state and population must be 1-D arrays of the same length")
        labels, codes = np.unique(state, return_inverse=True)
        codes = codes.reshape(-1)
        pops = np.bincount(codes, weights=population, minlength=labels.size)
        return cls(codes, labels.size, pops)

    def noisy_rates(self, y, epsilon_prior: float, rng) -> np.ndarray:
        """Per-cell prior rate lambda0*_{s_i} from geometric-noised state totals (eq 19).

        ``y`` is one dataset (1-D) or several (rows of a 2-D array, each with its own
        noise: rates of the same shape, the noise of every row drawn in one call, row
        after row).
        """
        y = np.asarray(y)
        if y.shape[-1:] != self.codes.shape or y.ndim not in (1, 2):
            raise ValueError(
                "y must hold one count per cell of the grouping (a 1-D array, or rows of them)"
            )
        rows = y.reshape(-1, self.codes.size)
        # Each row's state totals, summed in the order of its cells (as a bincount of it).
        bins = self.codes + self.n_states * np.arange(len(rows))[:, None]
        totals = np.bincount(
            bins.ravel(), weights=rows.ravel(), minlength=len(rows) * self.n_states
        ).reshape(len(rows), self.n_states)
        noisy = totals + geometric_noise(epsilon_prior, totals.shape, rng)
        rates = np.maximum(noisy, MIN_STATE_COUNT) / self.population
        return rates[:, self.codes].reshape(y.shape)

    def calibration(
        self,
        y,
        population,
        epsilon: float,
        epsilon_prior: float,
        rng: np.random.Generator,
        *,
        mechanism: str = "pg",
        method: str = "certified",
        **calibrate_kwargs,
    ) -> tuple[np.ndarray, Calibration]:
        """:func:`sanitised_prior_calibration` with this grouping (``population``: the
        cells' population the grouping was made with)."""
        check_prior_share(epsilon, epsilon_prior)
        rates = self.noisy_rates(y, epsilon_prior, rng)
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


def noisy_state_rates(y, state, population, epsilon_prior: float, rng) -> np.ndarray:
    """Per-cell prior rate lambda0*_{s_i} from geometric-noised state totals (eq 19)."""
    y = np.asarray(y)
    state = np.asarray(state)
    if not (y.shape == state.shape == np.shape(population)) or y.ndim != 1:
        raise ValueError("y, state and population must be 1-D arrays of the same length")
    return StateGroups.of(state, population).noisy_rates(y, epsilon_prior, rng)


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
    noisy_rates, method=method, ...)``. To calibrate many datasets of one geography, build
    :class:`StateGroups` once and call its ``calibration``.
    """
    check_prior_share(epsilon, epsilon_prior)
    return StateGroups.of(state, population).calibration(
        y, population, epsilon, epsilon_prior, rng, mechanism=mechanism, method=method,
        **calibrate_kwargs,
    )  # fmt: skip


def rates_from_noisy_totals(noisy_totals, group_population, floor: float = MIN_STATE_COUNT):
    """Post-processing of the noisy group totals: rates max(noisy, floor) / population."""
    return np.maximum(np.asarray(noisy_totals), floor) / np.asarray(group_population, float)


@dataclass(frozen=True)
class SanitisedPrior:
    """A released group prior. Everything in it is public: DP output or public input.

    ``labels``, ``noisy_totals``, ``group_population`` and ``group_rates`` are per group, in
    the order of ``labels`` (``numpy.unique`` of the groups: sorted, hence data-independent);
    ``rates`` is per stratum, in the order of the input. Arrays are read-only.
    """

    labels: np.ndarray  # group labels, sorted
    noisy_totals: np.ndarray  # int64: group total + discrete Laplace noise (exact if one group)
    group_population: np.ndarray  # float: population of each group (public)
    group_rates: np.ndarray  # max(noisy_total, floor) / group_population
    rates: np.ndarray  # per stratum: the rate of its group
    epsilon: float  # budget spent: epsilon_prior, or 0.0 with a single group
    floor: float  # floor applied to the noisy totals (post-processing)

    def __post_init__(self) -> None:
        for name in ("labels", "noisy_totals", "group_population", "group_rates", "rates"):
            getattr(self, name).flags.writeable = False


def sanitised_group_prior(
    counts,
    groups,
    population,
    epsilon_prior: float,
    rng: np.random.Generator,
    *,
    floor: float = MIN_STATE_COUNT,
) -> SanitisedPrior:
    """Prior rates from group totals of the confidential counts, released with DP noise.

    ``counts`` (non-negative integers), ``groups`` (a label per stratum, public: derived
    from the keys) and ``population`` (public, >= 0, every group's sum > 0) are 1-D arrays
    of the same length. Each group total T_g = sum of the counts of its strata gets
    independent discrete Laplace noise of scale 2 / eps_prior (exact sampler,
    :func:`dpcounts.privacy.discrete_laplace.geometric_noise`); the rate of group g is
    max(T_g + e_g, floor) / n_g, and each stratum gets the rate of its group.

    Privacy. Neighbours move one event between two strata (total and populations fixed).
    Within a group the totals do not change; between two groups two totals change by one:
    the L1 sensitivity of the vector of totals is 2, so the discrete Laplace with scale
    2 / eps_prior on each total gives, for every output v,
    p(v | y) / p(v | x) = exp(eps_prior / 2 * sum_g (|v_g - T_g(x)| - |v_g - T_g(y)|))
    <= exp(eps_prior / 2 * ||T(y) - T(x)||_1) <= exp(eps_prior): eps_prior-DP. The floor,
    the division by public populations and the per-stratum expansion are post-processing.

    A single group: its total is the overall total, which is public under this neighbouring
    relation (released exactly), so it is released without noise, ``rng`` is not used and
    nothing is spent (``epsilon`` is 0.0; ``epsilon_prior`` may be 0). Its rate is
    max(total, floor) / sum of populations, i.e. total / population whenever total >= 1
    (the floor only replaces a total of 0, whose rate 0 no gamma prior accepts).
    With two or more groups ``epsilon_prior`` must be finite and > 0.
    """
    counts = np.asarray(counts)
    groups = np.asarray(groups)
    population = np.asarray(population, dtype=float)
    if counts.ndim != 1 or counts.size == 0 or groups.shape != counts.shape:
        raise ValueError("counts and groups must be non-empty 1-D arrays of the same length")
    if population.shape != counts.shape:
        raise ValueError("population must hold one value per stratum")
    if counts.dtype.kind not in "iu" and not (
        counts.dtype.kind == "f" and np.all(np.isfinite(counts) & (counts == np.round(counts)))
    ):
        raise ValueError("counts must be integers")
    counts = counts.astype(np.int64)
    if np.any(counts < 0):
        raise ValueError("counts must be non-negative")
    if not np.all(np.isfinite(population) & (population >= 0)):
        raise ValueError("population must be finite and >= 0")
    epsilon_prior, floor = float(epsilon_prior), float(floor)
    if not (math.isfinite(floor) and floor > 0):
        raise ValueError(f"floor must be finite and > 0, got {floor!r}")
    labels, codes = np.unique(groups, return_inverse=True)
    codes = codes.reshape(-1)
    totals = np.zeros(labels.size, dtype=np.int64)
    np.add.at(totals, codes, counts)
    group_population = np.bincount(codes, weights=population, minlength=labels.size)
    if np.any(group_population <= 0):
        raise ValueError("every group needs a positive population")
    if labels.size == 1:
        if not (math.isfinite(epsilon_prior) and epsilon_prior >= 0):
            raise ValueError(f"epsilon_prior must be finite and >= 0, got {epsilon_prior!r}")
        noisy_totals, spent = totals, 0.0  # the overall total is public: no noise needed
    else:
        if not (math.isfinite(epsilon_prior) and epsilon_prior > 0):
            raise ValueError(
                f"epsilon_prior must be finite and > 0 with {labels.size} groups, "
                f"got {epsilon_prior!r}"
            )
        noise = geometric_noise(epsilon_prior, labels.size, rng, sensitivity=SENSITIVITY)
        noisy_totals, spent = totals + noise, float(epsilon_prior)
    group_rates = rates_from_noisy_totals(noisy_totals, group_population, floor)
    return SanitisedPrior(
        labels=labels,
        noisy_totals=noisy_totals,
        group_population=group_population,
        group_rates=group_rates,
        rates=group_rates[codes],
        epsilon=spent,
        floor=floor,
    )
