"""True rates from observed counts (for analysts with CDC WONDER exports).

**Smoothed observed rates** (:func:`smooth_observed_rates`), for analysts who have WONDER
exports: empirical-Bayes gamma-Poisson shrinkage of each county's crude rate toward its
group's rate (Marshall 1991, method of moments), suppressed cells replaced by their
posterior mean given that the count lies in the suppression range.
"""

from __future__ import annotations

import numpy as np
import pandas as pd


def smooth_observed_rates(
    deaths,
    population,
    groups=None,
    *,
    suppressed=None,
    suppressed_range: tuple[int, int] = (1, 9),
) -> np.ndarray:
    """Empirical-Bayes rates: observed crude rates shrunk toward their group's rate.

    Within each group (e.g. the state; ``None``: one national group) the prior is
    Gamma(shape a, rate b) with mean m = sum y / sum n and between-county variance
    A = max(0, s^2 - m / mean(n)), s^2 the population-weighted variance of the crude
    rates (Marshall 1991); a = m^2 / A, b = m / A. A county's rate is its posterior mean
    (y + a) / (n + b); when A = 0 every county gets m. Only unsuppressed counties enter
    m and A. A suppressed county (``suppressed`` true, its death count unknown but in
    ``suppressed_range``, WONDER's 1-9) gets the posterior mean given that range, i.e. the
    average of (y + a) / (n + b) over y in the range weighted by the negative-binomial
    prior predictive of y. A group with fewer than two unsuppressed counties borrows the
    national m and A. A missing count that is not marked suppressed is an error.
    """
    population = np.asarray(population, dtype=float)
    deaths = pd.array(deaths, dtype="Float64").to_numpy(dtype=float, na_value=np.nan)
    count = len(population)
    if deaths.shape != (count,):
        raise ValueError("deaths and population must be 1-D and of the same length")
    hidden = np.zeros(count, bool) if suppressed is None else np.asarray(suppressed, bool)
    labels = np.zeros(count, int) if groups is None else pd.factorize(np.asarray(groups))[0]
    if not np.all(np.isfinite(population) & (population > 0)):
        bad = _where(~(population > 0))
        raise ValueError(f"population must be > 0 everywhere; bad at positions {bad}")
    unexplained = np.isnan(deaths) & ~hidden
    if unexplained.any():
        raise ValueError(
            f"deaths missing at positions {_where(unexplained)} without a suppression flag; "
            "expected a count or suppressed=True"
        )
    observed = ~hidden
    if np.any(deaths[observed] < 0):
        raise ValueError(f"negative deaths at positions {_where(observed & (deaths < 0))}")
    if not observed.any():
        raise ValueError("every count is suppressed; expected at least one observed count")
    low, high = suppressed_range
    if not 0 <= low <= high:
        raise ValueError(f"suppressed_range must satisfy 0 <= low <= high, got {suppressed_range}")

    national = _gamma_prior(deaths[observed], population[observed])
    rates = np.empty(count)
    for label in np.unique(labels):
        members = labels == label
        seen = members & observed
        prior = _gamma_prior(deaths[seen], population[seen]) if seen.sum() >= 2 else national
        rates[members] = _posterior_mean(
            deaths[members], population[members], hidden[members], prior, low, high
        )
    return rates


def _where(mask: np.ndarray) -> list[int]:
    return np.flatnonzero(mask)[:5].tolist()


def _gamma_prior(deaths: np.ndarray, population: np.ndarray) -> tuple[float, float]:
    """(m, A): group rate and method-of-moments between-county variance (>= 0)."""
    mean = deaths.sum() / population.sum()
    crude = deaths / population
    spread = np.sum(population * (crude - mean) ** 2) / population.sum()
    return mean, max(0.0, spread - mean / population.mean())


def _posterior_mean(deaths, population, hidden, prior, low, high) -> np.ndarray:
    mean, variance = prior
    if variance == 0 or mean == 0:
        return np.full(len(population), mean)
    shape, rate = mean**2 / variance, mean / variance
    result = (np.nan_to_num(deaths) + shape) / (population + rate)
    if hidden.any():
        counts = np.arange(low, high + 1)[:, None]
        n = population[hidden][None, :]
        import scipy.stats  # here: the modelled truth's jobs need no scipy.stats (a second)

        weights = scipy.stats.nbinom.pmf(counts, shape, rate / (rate + n))
        result[hidden] = np.sum(weights * (counts + shape), axis=0) / (
            weights.sum(axis=0) * (n[0] + rate)
        )
    return result


def truth_from_wonder(
    frame: pd.DataFrame,
    counties: pd.DataFrame,
    *,
    age_group_code: str | None = None,
    prior: str = "state",
    source: str = "WONDER export",
) -> pd.DataFrame:
    """True rates as smoothed observed rates of a :func:`~dpcounts.data.read_wonder` frame.

    Keeps the rows of ``age_group_code`` (when given), keys them by ``county_code`` and
    requires exactly one row per county of ``counties`` with a known population;
    suppressed death counts are handled by :func:`smooth_observed_rates`. ``prior`` is
    ``"state"`` (shrink toward the state's rate; the state is the FIPS's first two
    digits) or ``"national"``. Returns ``fips, population, rate, expected`` in the
    order of ``counties``.
    """
    if prior not in ("state", "national"):
        raise ValueError(f"prior must be 'state' or 'national', got {prior!r}")
    for column in ("county_code", "deaths", "population", "suppressed"):
        if column not in frame.columns:
            raise ValueError(
                f"{source}: missing column {column!r}; expected a WONDER county export"
            )
    if age_group_code is not None:
        if "age_group_code" not in frame.columns:
            raise ValueError(f"{source}: no 'Age Group Code' column to select {age_group_code!r}")
        frame = frame[frame["age_group_code"] == age_group_code]
        if frame.empty:
            raise ValueError(f"{source}: no rows with age group code {age_group_code!r}")
    fips = counties["fips"].astype(str).reset_index(drop=True)
    rows = frame.assign(fips=frame["county_code"].astype(str))
    duplicated = rows["fips"][rows["fips"].duplicated()]
    if len(duplicated):
        raise ValueError(
            f"{source}: county codes appear more than once: {duplicated.head(5).tolist()}; "
            "expected one row per county (select one age group)"
        )
    unknown = rows["fips"][~rows["fips"].isin(fips)]
    if len(unknown):
        raise ValueError(
            f"{source}: county codes not in the county frame: {unknown.head(5).tolist()}"
        )
    absent = fips[~fips.isin(rows["fips"])]
    if len(absent):
        raise ValueError(
            f"{source}: {len(absent)} county(ies) of the frame have no row, e.g. "
            f"{absent.head(5).tolist()}; expected every county"
        )
    rows = rows.set_index("fips").loc[fips]
    sizes = rows["population"].astype("Float64").to_numpy(dtype=float, na_value=np.nan)
    bad = ~(sizes > 0)
    if bad.any():
        raise ValueError(
            f"{source}: missing or non-positive population for {fips[bad].head(5).tolist()}; "
            "expected populations > 0"
        )
    groups = fips.str[:2].to_numpy() if prior == "state" else None
    rate = smooth_observed_rates(
        rows["deaths"], sizes, groups, suppressed=rows["suppressed"].to_numpy(bool)
    )
    return pd.DataFrame({"fips": fips, "population": sizes, "rate": rate, "expected": sizes * rate})
