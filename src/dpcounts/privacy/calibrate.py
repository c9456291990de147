"""The public ``calibrate`` dispatcher: epsilon and public inputs -> :class:`Calibration`.

A calibration never sees the confidential counts: it depends on epsilon, the public
total y., the populations and the prior rates only (docs/privacy.md, Part 1), so it can be
cached and published beside the synthetic data.

============  ==========  ===================================================  ============
mechanism     method      shapes a                                             guarantee
============  ==========  ===================================================  ============
md            paper       y. / (e^eps - 1) (Quick (2021), eq 5; 'certified' alike)  exact eps-DP
pg            paper       Quick (2021), eq (15), fixed point                        nominal
pg            certified   docs/privacy.md (kappa_i + kappa_j <= eps)           proven
pg            exact       exact bivariate, L = 0, U = y.                       bivariate
truncated     paper       Quick (2022), eq (13), fixed point, Kerman floors         nominal
truncated     certified   docs/privacy.md, Kerman floors                       proven
truncated     exact       exact bivariate ratio of Quick (2022), eqs (9)-(10)       bivariate
============  ==========  ===================================================  ============
"""

from __future__ import annotations

import numbers

import numpy as np

from dpcounts.calibration import Calibration
from dpcounts.mechanisms.multinomial_dirichlet import md_alpha
from dpcounts.mechanisms.poisson_gamma import gamma_rates
from dpcounts.mechanisms.truncation import (
    check_no_dominant_cell,
    default_tail,
    truncation_bounds,
)
from dpcounts.privacy.certified import certified_shapes
from dpcounts.privacy.exact_bivariate import exact_bivariate_shapes
from dpcounts.privacy.paper import pg_paper_shapes, truncated_paper_shapes


def _validate_epsilon(epsilon) -> float:
    if isinstance(epsilon, bool) or not isinstance(epsilon, numbers.Real):
        raise TypeError(f"epsilon must be a real number, got {epsilon!r}")
    if not (np.isfinite(epsilon) and epsilon > 0):
        raise ValueError(f"epsilon must be a finite number > 0, got {epsilon!r}")
    return float(epsilon)


def _validate_total(total) -> int:
    if isinstance(total, bool) or not isinstance(total, numbers.Real):
        raise TypeError(f"total must be a positive integer, got {total!r}")
    if not (np.isfinite(total) and total > 0 and float(total).is_integer()):
        raise ValueError(f"total must be a positive integer (the public y.), got {total!r}")
    return int(total)


def _validate_population(population) -> np.ndarray:
    population = np.asarray(population, dtype=float)
    if population.ndim != 1 or population.size < 2:
        raise ValueError(
            f"population must be a 1-D array with at least two cells, got shape {population.shape}"
        )
    if not np.all(np.isfinite(population)) or np.any(population <= 0):
        bad = np.flatnonzero(~np.isfinite(population) | (population <= 0))
        raise ValueError(
            f"population must be finite and > 0 in every cell; bad cell(s) {bad.tolist()[:10]}"
        )
    return population


def _validate_prior_rate(prior_rate, total: int, population: np.ndarray) -> np.ndarray:
    if prior_rate is None:
        # The national rate y. / n.: public because y. and the populations are public.
        return np.full(population.size, total / population.sum())
    prior_rate = np.asarray(prior_rate, dtype=float)
    if prior_rate.ndim == 0:
        prior_rate = np.full(population.size, float(prior_rate))
    if prior_rate.shape != population.shape:
        raise ValueError(
            f"prior_rate has {prior_rate.size} cells but population has {population.size}"
        )
    bad = np.flatnonzero(~np.isfinite(prior_rate) | (prior_rate <= 0))
    if bad.size:
        raise ValueError(
            f"prior_rate must be finite and > 0 where population > 0; bad cell(s) "
            f"{bad.tolist()[:10]}"
        )
    return prior_rate


def calibrate(
    mechanism: str,
    epsilon: float,
    total: int,
    population,
    prior_rate=None,
    *,
    method: str = "paper",
    tail: float | None = None,
    inflation: float = 1.0,
) -> Calibration:
    """Public hyperparameters of ``mechanism`` at privacy budget ``epsilon``.

    Parameters
    ----------
    mechanism : "md" | "pg" | "truncated"
    epsilon : privacy budget, > 0
    total : the public total y. (positive integer)
    population : populations n_i (> 0), one per cell; only their number matters for md
    prior_rate : prior rates lambda0_i (> 0) or a scalar; None means the national rate
        y. / sum(n) in every cell
    method : "paper" (the papers' closed forms, nominal eps), "certified" (proven, see
        docs/privacy.md) or "exact" (exact bivariate ratio; pg and truncated)
    tail, inflation : truncation settings (truncated only): tail defaults to
        min(0.001, 1/I), inflation xi >= 1 widens the bounds

    Returns a :class:`~dpcounts.calibration.Calibration`; b = a / prior_rate (None for md).
    The family's own function (:mod:`dpcounts.mechanisms.registry`) chooses the values.
    """
    from dpcounts.mechanisms.registry import family, methods, names

    found = family(mechanism)
    if method not in found.methods:
        raise ValueError(
            f"method must be one of {list(found.methods)} for mechanism {mechanism!r}, got "
            f"{method!r}" + (f" (of {list(methods())})" if method not in methods() else "")
        )
    epsilon = _validate_epsilon(epsilon)
    total = _validate_total(total)
    population = _validate_population(population)
    settings = {"tail": tail, "inflation": inflation}
    if not found.bounded and (tail is not None or inflation != 1.0):
        bounded = [f"mechanism={name!r}" for name in names() if family(name).bounded]
        raise ValueError(f"tail and inflation apply to {' or '.join(bounded)} only, not "
                         f"{mechanism!r}")  # fmt: skip
    settings = {k: v for k, v in settings.items() if k in found.settings}
    if found.uses_prior:
        prior_rate = _validate_prior_rate(prior_rate, total, population)
    cal = found.calibrate(epsilon, total, population, prior_rate, method, settings)
    return _checked(cal)


def calibrate_md(epsilon, total, population, prior_rate, method) -> Calibration:
    """md's calibration (Quick (2021), eq 5; every method the same alpha)."""
    a = md_alpha(epsilon, total, population.size)
    # The populations ride along (public) so posterior_rates can report per-person rates.
    return Calibration("md", method, epsilon, total, a, population=population)


def _checked(cal: Calibration) -> Calibration:
    """Refuse shapes a sampler cannot use (they underflow to 0 at very large epsilon)."""
    bad = ~np.isfinite(cal.a) | (cal.a <= 0)
    if bad.any():
        raise ValueError(
            f"epsilon {cal.epsilon:g} is too large for {cal.mechanism}/{cal.method}: the "
            f"shapes a underflow to 0 (cell {int(np.flatnonzero(bad)[0])}); expected a smaller "
            "epsilon (at such values the release would copy the data anyway)"
        )
    return cal


def calibrate_pg(epsilon, total, population, prior_rate, method) -> Calibration:
    """pg's calibration (shapes by ``method``, rates b = a / prior_rate)."""
    if method == "paper":
        a = pg_paper_shapes(epsilon, total, population, prior_rate)
    else:
        lower = np.zeros(population.size, np.int64)
        upper = np.full(population.size, total, np.int64)
        a = certified_shapes(epsilon, total, lower, upper, truncated=False)
        if method == "exact":
            a = exact_bivariate_shapes(
                epsilon, total, population, prior_rate, lower, upper, a, truncated=False
            )
    b = gamma_rates(a, prior_rate)
    return Calibration("pg", method, epsilon, total, a, b, population, prior_rate)


def calibrate_truncated(
    epsilon, total, population, prior_rate, method, tail=None, inflation=1.0
) -> Calibration:
    """truncated's calibration: bounds from the prior's expected counts, then shapes."""
    expected = population * prior_rate
    if tail is None:
        tail = default_tail(population.size)
    lower, upper = truncation_bounds(expected, total, tail, inflation)
    if method == "paper":
        check_no_dominant_cell(expected)
        a = truncated_paper_shapes(epsilon, total, lower, upper)
    else:
        a = certified_shapes(epsilon, total, lower, upper, truncated=True)
        if method == "exact":
            a = exact_bivariate_shapes(epsilon, total, population, prior_rate, lower, upper, a)
    b = gamma_rates(a, prior_rate)
    return Calibration(
        "truncated",
        method,
        epsilon,
        total,
        a,
        b,
        population,
        prior_rate,
        lower,
        upper,
        tail=float(tail),
        inflation=float(inflation),
    )
