"""The standard intervals with no privacy: of rates and of directly age-adjusted rates.

Computed from the exact counts, these are the intervals a release without privacy would
report, the ones the private intervals are set beside (issue #54, item 3).

A rate y / n (y deaths in a population of n) gets the exact (Garwood) Poisson interval,
with alpha = 1 - level::

    lower = chi2.ppf(alpha / 2, 2 y) / 2 / n          (0 when y = 0)
    upper = chi2.ppf(1 - alpha / 2, 2 (y + 1)) / 2 / n

the interval of R's ``poisson.test(y, n)$conf.int``. A directly age-adjusted rate over age
groups i, with counts y_i, populations n_i and a standard population s_i, gets the gamma
interval of Fay and Feuer (1997), exactly as R epitools' ``ageadjust.direct(count, pop,
stdpop = s, conf.level = level)`` computes it::

    w_i = s_i / sum(s) / n_i                  (the weight of one death in group i)
    dsr = sum(w_i y_i)                        (the adjusted rate)
    v   = sum(w_i^2 y_i)                      (its variance under Poisson counts)
    wm  = max(w_i)
    lower = gamma.ppf(alpha / 2, shape = dsr^2 / v, scale = v / dsr)
    upper = gamma.ppf(1 - alpha / 2, shape = (dsr + wm)^2 / (v + wm^2),
                      scale = (v + wm^2) / (dsr + wm))

with the crude rate sum(y) / sum(n) beside it. With one age group both intervals are the
same exact Poisson interval. Where no group has a death (dsr = v = 0) epitools' lower bound
is NaN (a gamma of shape 0 / 0); here it is 0, its limit and the Poisson interval's lower
bound at y = 0; the upper bound is epitools' own there.

A ratio of two rates r_N / r_D (a disparity: crude or directly age-adjusted rates, each with
its Poisson variance v = sum w_i^2 y_i as above) gets the log-ratio normal (delta-method)
interval, the standard Wald interval of a rate ratio on the log scale (Rothman and
Greenland, *Modern Epidemiology*; for crude rates its variance is 1/y_N + 1/y_D)::

    se    = sqrt(v_N / r_N^2 + v_D / r_D^2)
    lower = (r_N / r_D) exp(-z se),  upper = (r_N / r_D) exp(z se),  z = norm.ppf(1 - alpha / 2)

All results are scaled by ``per`` (default per 100,000; ``per=1`` gives rates per person as
R does).

References: Fay MP, Feuer EJ. Confidence intervals for directly standardized rates: a method
based on the gamma distribution. Stat Med 1997;16:791-801. Aragon TJ, epitools (R package),
``ageadjust.direct``.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from scipy import stats

from dpcounts.units import PER_100K


class RateInterval(NamedTuple):
    """A rate and its interval, each an array of the inputs' broadcast shape (or a float)."""

    estimate: np.ndarray
    lower: np.ndarray
    upper: np.ndarray


class AdjustedRateInterval(NamedTuple):
    """epitools' ``ageadjust.direct`` result: the crude rate, the directly adjusted rate and
    the Fay-Feuer interval's bounds, each of the counts' shape less the last (age) axis."""

    crude: np.ndarray
    adjusted: np.ndarray
    lower: np.ndarray
    upper: np.ndarray


def _alpha(level) -> float:
    level = float(level)
    if not 0.0 < level < 1.0:
        raise ValueError(
            f"level: expected a confidence level strictly between 0 and 1, got {level}"
        )
    return 1.0 - level


def _per(per) -> float:
    per = float(per)
    if not (np.isfinite(per) and per > 0):
        raise ValueError(f"per: expected a positive finite scale (e.g. 1e5), got {per}")
    return per


def _array(name: str, values, *, positive: bool) -> np.ndarray:
    try:
        array = np.asarray(values, dtype=float)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{name}: expected numbers, got {values!r}") from error
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{name}: expected finite numbers, got NaN or infinity")
    if positive and np.any(array <= 0):
        raise ValueError(f"{name}: expected positive numbers, got {array[array <= 0][0]:g}")
    if not positive and np.any(array < 0):
        raise ValueError(f"{name}: expected non-negative numbers, got {array[array < 0][0]:g}")
    return array


def _scalar_or_array(array: np.ndarray):
    return float(array) if array.ndim == 0 else array


def poisson_rate_interval(count, population, level: float = 0.95, per: float = PER_100K):
    """The rate ``count / population`` and its exact (Garwood) Poisson interval, x ``per``.

    ``count``: deaths, non-negative (whole numbers for the interval to be exact);
    ``population``: positive; any shapes that broadcast together. Returns a
    :class:`RateInterval` (estimate, lower, upper), floats for scalar inputs, arrays of the
    broadcast shape otherwise. The lower bound is 0 where the count is 0. Raises ValueError
    naming the argument for a negative or non-finite count, a population <= 0, shapes that do
    not broadcast, a level outside (0, 1) or a ``per`` <= 0.
    """
    alpha = _alpha(level)
    per = _per(per)
    y = _array("count", count, positive=False)
    n = _array("population", population, positive=True)
    try:
        y, n = np.broadcast_arrays(y, n)
    except ValueError as error:
        raise ValueError(
            f"count, population: expected shapes that broadcast together, got {y.shape} "
            f"and {n.shape}"
        ) from error
    with np.errstate(invalid="ignore"):
        lower = np.where(y > 0, stats.chi2.ppf(alpha / 2, 2 * y) / 2, 0.0)
    upper = stats.chi2.ppf(1 - alpha / 2, 2 * (y + 1)) / 2
    return RateInterval(
        _scalar_or_array(y / n * per),
        _scalar_or_array(lower / n * per),
        _scalar_or_array(upper / n * per),
    )


def age_adjusted_interval(
    counts, populations, standard, level: float = 0.95, per: float = PER_100K
):
    """The directly age-adjusted rate and its Fay-Feuer gamma interval, x ``per``.

    ``counts``: deaths by age group, non-negative, shape ``(ages,)`` for one group or
    ``(..., ages)`` for several at once (e.g. counties x ages), the last axis the age groups;
    ``populations``: positive, of a shape that broadcasts to the counts'; ``standard``: the
    standard population, shape ``(ages,)``, non-negative with a positive sum (its scale does
    not matter: it is normalised). Returns an :class:`AdjustedRateInterval` (crude, adjusted,
    lower, upper) equal to epitools' ``ageadjust.direct(counts, populations, stdpop =
    standard, conf.level = level)`` x ``per`` for each group: floats for one group, arrays of
    the counts' shape less the last axis otherwise (the one difference: the lower bound is 0,
    not NaN, for a group with no deaths). Raises ValueError naming the argument for a
    negative or non-finite count, a population <= 0, a standard of the wrong length, negative
    or summing to 0, shapes that do not broadcast, a level outside (0, 1) or a ``per`` <= 0.
    """
    alpha = _alpha(level)
    per = _per(per)
    y = _array("counts", counts, positive=False)
    n = _array("populations", populations, positive=True)
    s = _array("standard", standard, positive=False)
    if y.ndim == 0:
        raise ValueError(
            "counts: expected an array with the age groups on its last axis, got a scalar"
        )
    if s.ndim != 1 or s.shape[0] != y.shape[-1]:
        raise ValueError(
            f"standard: expected one population per age group, shape ({y.shape[-1]},), "
            f"got shape {s.shape}"
        )
    if s.sum() <= 0:
        raise ValueError("standard: expected a positive total, got 0")
    try:
        n = np.broadcast_to(n, y.shape)
    except ValueError as error:
        raise ValueError(
            f"populations: expected a shape that broadcasts to the counts' {y.shape}, got {n.shape}"
        ) from error

    weight = s / s.sum() / n  # w_i: the weight of one death in age group i
    crude = y.sum(axis=-1) / n.sum(axis=-1)
    dsr = np.sum(weight * y, axis=-1)
    var = np.sum(weight**2 * y, axis=-1)
    wm = np.max(weight, axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        lower = np.where(
            dsr > 0,
            stats.gamma.ppf(alpha / 2, dsr**2 / var, scale=var / dsr),
            0.0,
        )
    upper = stats.gamma.ppf(
        1 - alpha / 2, (dsr + wm) ** 2 / (var + wm**2), scale=(var + wm**2) / (dsr + wm)
    )
    return AdjustedRateInterval(
        _scalar_or_array(crude * per),
        _scalar_or_array(dsr * per),
        _scalar_or_array(np.asarray(lower) * per),
        _scalar_or_array(np.asarray(upper) * per),
    )


def rate_ratio_interval(rate_n, variance_n, rate_d, variance_d, level: float = 0.95):
    """The ratio of two rates ``rate_n / rate_d`` and its log-ratio normal (delta-method)
    interval (module docstring), from each rate and its Poisson variance (any one scale, the
    same for both: the ratio does not depend on it). Returns a :class:`RateInterval`
    (estimate, lower, upper). Raises ValueError naming the argument for a rate that is not
    positive (a side without events has no finite ratio) or a negative variance."""
    alpha = _alpha(level)
    r_n = _array("rate_n", rate_n, positive=True)
    r_d = _array("rate_d", rate_d, positive=True)
    v_n = _array("variance_n", variance_n, positive=False)
    v_d = _array("variance_d", variance_d, positive=False)
    ratio = r_n / r_d
    spread = stats.norm.ppf(1 - alpha / 2) * np.sqrt(v_n / r_n**2 + v_d / r_d**2)
    return RateInterval(
        _scalar_or_array(ratio),
        _scalar_or_array(ratio * np.exp(-spread)),
        _scalar_or_array(ratio * np.exp(spread)),
    )
