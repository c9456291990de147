"""The two entry points studies call: ``synthesize`` (releases) and ``posterior_rates``.

``synthesize`` draws from exactly the distribution whose privacy the calibrations and the
audit analyse: the product of the cells' posterior predictive (truncated) negative
binomials conditioned on sum z = y. For md that is the Dirichlet-multinomial, drawn
directly (theta ~ Dir(y + alpha), z ~ Mult(y., theta)); pg and truncated use the exact
tree sampler :class:`~dpcounts.sampling.study_mode.StudySampler`.

Quick (2022), eq (7) (gamma rates, then one multinomial) is *not* used for pg or truncated
releases: it equals the conditioned product only when b_i / n_i is the same in every cell.
It survives as ``posterior_rates``, the utility proxy of Study 1.
"""

from __future__ import annotations

import numpy as np

from dpcounts.calibration import Calibration
from dpcounts.mechanisms.registry import family
from dpcounts.sampling.bounds import check_count_rows, check_counts, check_feasible
from dpcounts.sampling.study_mode import StudySampler

__all__ = [
    "posterior_rates",
    "posterior_rates_of_counts",
    "posterior_rates_per_dataset",
    "synthesize",
]


def _check_draw_args(size, rng) -> int:
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy.random.Generator, got {type(rng)}")
    if isinstance(size, bool) or int(size) != size or size < 0:
        raise ValueError(f"size must be a non-negative integer, got {size!r}")
    return int(size)


def synthesize(y, cal: Calibration, size: int, rng: np.random.Generator) -> np.ndarray:
    """``size`` synthetic count vectors released for data ``y`` under calibration ``cal``.

    Returns an int64 array (size, I); every row sums to y. and lies within ``cal.bounds()``.
    To draw repeatedly for one dataset, build ``StudySampler(y, cal)`` once and call
    its ``draw`` instead (md included).
    """
    counts = check_counts(y, cal)
    size = _check_draw_args(size, rng)
    check_feasible(cal)
    return family(cal.mechanism).draw(counts, cal, size, rng)  # the family's sampler


def draw_dirichlet_multinomial(counts, cal: Calibration, size: int, rng) -> np.ndarray:
    """md's sampler: theta ~ Dir(y + alpha), then Multinomial(y., theta), ``size`` rows
    (``counts`` checked, :func:`synthesize` checks them); with bounds, the conditioned
    sampler's."""
    if cal.truncated:
        return draw_conditioned(counts, cal, size, rng)
    if not np.all(np.isfinite(cal.a)) or np.any(cal.a <= 0):
        raise ValueError("cal.a (the Dirichlet alphas) must be finite and positive")
    theta = rng.dirichlet(counts + cal.a, size=size)
    # normalise away round-off so multinomial's sum(pvals) <= 1 check always passes
    theta /= theta.sum(axis=1, keepdims=True)
    return rng.multinomial(cal.total, theta).astype(np.int64)


def draw_conditioned(counts, cal: Calibration, size: int, rng) -> np.ndarray:
    """pg's and truncated's sampler: the exact conditioned sampler
    (:class:`~dpcounts.sampling.study_mode.StudySampler`), ``size`` rows."""
    return StudySampler(counts, cal).draw(size, rng)


def posterior_rates(y, cal: Calibration, size: int, rng: np.random.Generator) -> np.ndarray:
    """``size`` draws of the cells' posterior event rates: float array (size, I).

    pg, truncated: lambda_i ~ Gamma(~y_i + a_i, rate n_i + b_i), ~y = cal.clamp(y).
    md: theta ~ Dir(y + alpha), lambda_i = theta_i y. / n_i (needs cal.population).
    """
    counts = check_counts(y, cal)
    size = _check_draw_args(size, rng)
    if cal.population is None:
        raise ValueError(
            f"posterior_rates needs cal.population (rates are per person); this {cal.mechanism} "
            "calibration has none"
        )
    if np.any(cal.population <= 0):
        raise ValueError("cal.population must be positive in every cell")
    return posterior_rates_of_counts(counts, cal, size, rng)


def posterior_rates_of_counts(
    counts: np.ndarray, cal: Calibration, size: int, rng: np.random.Generator
) -> np.ndarray:
    """:func:`posterior_rates` without its checks, for a caller that made them once for
    many draws: ``counts`` is an int64 vector of non-negative counts summing to
    ``cal.total`` (e.g. a row of ``check_count_rows``), ``cal.population`` is positive in
    every cell and ``size`` a non-negative int. The same draws as :func:`posterior_rates`.
    """
    population = cal.population
    if not family(cal.mechanism).uses_prior:  # md: theta ~ Dir(y + alpha)
        theta = rng.dirichlet(counts + cal.a, size=size)
        return theta * cal.total / population[None, :]
    shape = cal.clamp(counts) + cal.a
    rate = population + cal.b
    return rng.gamma(shape, 1.0 / rate, size=(size, cal.n_cells))


def posterior_rates_per_dataset(ys, cal: Calibration, rng: np.random.Generator) -> np.ndarray:
    """One draw of the posterior rates for each dataset (row) of ``ys``: float (m, I).

    The same distribution as ``posterior_rates(ys[k], cal, 1, rng)`` for every row k, drawn
    in one vectorised call (studies score hundreds of datasets per job). md's Dirichlet is
    drawn as normalised gammas, which is its definition.
    """
    ys = np.asarray(ys)
    if ys.ndim != 2:
        raise ValueError(f"ys must be a 2-D array (datasets x cells), got shape {ys.shape}")
    counts = check_count_rows(ys, cal) if len(ys) else ys
    _check_draw_args(1, rng)
    if cal.population is None or np.any(cal.population <= 0):
        raise ValueError("posterior rates need cal.population, positive in every cell")
    if not family(cal.mechanism).uses_prior:  # md: normalised gammas
        rates = rng.gamma(counts + cal.a)
        rates /= rates.sum(axis=1, keepdims=True)  # theta, in place: the same operations
        rates *= cal.total
        rates /= cal.population[None, :]
        return rates
    shape = cal.clamp(counts) + cal.a
    return rng.gamma(shape, 1.0 / (cal.population + cal.b)[None, :])
