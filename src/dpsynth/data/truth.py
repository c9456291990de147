"""Study 1's true county death rates (Quick (2021), section 3.1).

The paper's truth is the posterior median of a spatial Poisson model fitted to 1980
heart-disease deaths from CDC WONDER; those counts cannot be had here. Two sources:

**Modelled truth** (:func:`model_truth`, the default). On the real populations n_i,

    log(rate_i) = mu + s_state(i) + phi_i + e_i,

- ``s`` iid Normal(0, state_sd^2), one per state;
- ``phi`` a proper CAR Gaussian Markov random field on the queen graph: precision
  ``D - rho W`` (W the 0/1 adjacency, D its degrees, 0 <= rho < 1 the spatial
  dependence), drawn exactly from a dense Cholesky factor (O(n^3), fine for the few
  thousand counties of the US), then multiplied by ``spatial_sd / sqrt(v)`` where ``v`` is
  the geometric mean of the field's marginal variances (the scaling of Sorbye & Rue
  2014), so ``spatial_sd`` is the field's typical standard deviation whatever the graph.
  A county without neighbours (an island) gets precision 1, i.e. an independent draw
  with the same scaling;
- ``e`` iid Normal(0, iid_sd^2);
- ``mu`` solved in closed form so that sum_i n_i rate_i equals ``total_deaths`` (the paper's
  y. = 11,364 deaths at ages 35-44).

**Older age groups** (:func:`model_truth_related`, Study 1's Appendix C: 45-54 ... 85+).
Their 1980 death counts are not available either, so both the totals and the
populations are modelled: the total of group a is a national rate per 100,000 times the
group's modelled population (:func:`modelled_total`), and the county rates mix the
35-44 pattern with an independent draw of the model above,
log(rate_i) = mu_a + rho r_i + sqrt(1 - rho^2) x_i, so that the maps of the groups are
related (the paper fitted a multivariate CAR across ages) without being copies.

**Smoothed observed rates** (:func:`smooth_observed_rates`), for analysts who have WONDER
exports: empirical-Bayes gamma-Poisson shrinkage of each county's crude rate toward its
group's rate (Marshall 1991, method of moments), suppressed cells replaced by their
posterior mean given that the count lies in the suppression range.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields

import numpy as np
import pandas as pd
import scipy.linalg
import scipy.sparse
import scipy.stats
from scipy.special import logsumexp

from dpsynth.data.counties import queen_adjacency
from dpsynth.units import PER_100K


@dataclass(frozen=True)
class TruthModel:
    """Parameters of the modelled truth (see the module docstring for the model).

    Defaults are this project's choices, not the paper's (the paper does not report its
    fitted variances): a state effect, a strongly dependent spatial field and a little
    county noise, so the map shows regional patterns as posterior medians of a spatial
    model would. The log-scale variance of a rate is about state_sd^2 + spatial_sd^2 +
    iid_sd^2; the workflow's summary JSON reports the spread the defaults produce.
    """

    total_deaths: float = 11364.0
    state_sd: float = 0.15
    spatial_sd: float = 0.20
    spatial_dependence: float = 0.99
    iid_sd: float = 0.10

    def __post_init__(self) -> None:
        if not self.total_deaths > 0:
            raise ValueError(f"total_deaths must be > 0, got {self.total_deaths!r}")
        for name in ("state_sd", "spatial_sd", "iid_sd"):
            value = getattr(self, name)
            if not (np.isfinite(value) and value >= 0):
                raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
        if not 0 <= self.spatial_dependence < 1:
            raise ValueError(
                f"spatial_dependence must be in [0, 1) for a proper CAR, "
                f"got {self.spatial_dependence!r}"
            )

    @classmethod
    def from_config(cls, section: Mapping) -> TruthModel:
        """Build from the config's ``truth.model`` mapping; unknown keys are an error."""
        known = {field.name for field in fields(cls)}
        unknown = sorted(set(section) - known)
        if unknown:
            raise ValueError(f"truth.model: unknown key(s) {unknown}; expected {sorted(known)}")
        return cls(**{key: float(value) for key, value in section.items()})


def proper_car_field(
    adjacency: scipy.sparse.spmatrix,
    dependence: float,
    rng: np.random.Generator,
    size: int | None = None,
) -> np.ndarray:
    """Draw(s) of a proper CAR field, scaled to geometric-mean marginal variance 1.

    Precision ``D - dependence * W``; islands (degree 0) get precision 1. Exact draw:
    ``x = L^-T z`` with ``L L^T`` the precision and ``z`` standard normal. Returns one
    field (shape ``(n,)``) or, with ``size``, ``size`` independent fields ``(size, n)``.
    """
    weights = scipy.sparse.csr_matrix(adjacency, dtype=float)
    degree = np.asarray(weights.sum(axis=1)).ravel()
    count = len(degree)
    diagonal = np.where(degree > 0, degree, 1.0)
    precision = (scipy.sparse.diags(diagonal) - dependence * weights).toarray()
    lower = scipy.linalg.cholesky(precision, lower=True)
    normals = rng.standard_normal((count, 1 if size is None else size))
    draws = scipy.linalg.solve_triangular(lower.T, normals, lower=False).T
    # marginal variances diag(Q^-1) = column sums of squares of L^-1
    inverse = scipy.linalg.solve_triangular(lower, np.eye(count), lower=True)
    marginal_variance = np.einsum("ij,ij->j", inverse, inverse)
    draws /= np.sqrt(np.exp(np.mean(np.log(marginal_variance))))
    return draws[0] if size is None else draws


def model_truth(
    counties: pd.DataFrame,
    edges: pd.DataFrame,
    population: pd.Series,
    params: TruthModel,
    rng: np.random.Generator,
) -> pd.DataFrame:
    """Modelled true rates on real populations (see the module docstring).

    ``counties`` needs ``fips`` and ``state_fips`` (one row per county, this order is kept);
    ``edges`` has ``fips_a, fips_b``; ``population`` is indexed by FIPS and covers every
    county with a positive size. Returns ``fips, population, rate, expected`` (rate per
    person, expected = population * rate) plus the log-scale components ``state_effect,
    spatial_effect, iid_effect`` and ``log_national`` (mu).
    """
    fips = counties["fips"].astype(str).reset_index(drop=True)
    sizes = _aligned_population(population, fips)
    adjacency = queen_adjacency(edges, fips)

    state_effect, spatial_effect, iid_effect = _relative_effects(counties, adjacency, params, rng)
    return _scaled_truth(
        fips,
        sizes,
        params.total_deaths,
        state_effect=state_effect,
        spatial_effect=spatial_effect,
        iid_effect=iid_effect,
    )


def _scaled_truth(fips, sizes, total_deaths: float, **effects) -> pd.DataFrame:
    """Rates exp(mu + sum of the log-scale effects), mu solved so that the expected total
    sum_i n_i rate_i equals ``total_deaths``; the effects are kept as columns."""
    relative = sum(effects.values())
    log_national = np.log(total_deaths) - logsumexp(relative, b=sizes)
    rate = np.exp(log_national + relative)
    return pd.DataFrame(
        {
            "fips": fips,
            "population": sizes,
            "rate": rate,
            "expected": sizes * rate,
            **effects,
            "log_national": np.full(len(fips), log_national),
        }
    )


def _relative_effects(
    counties: pd.DataFrame,
    adjacency: scipy.sparse.spmatrix,
    params: TruthModel,
    rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """State effect, CAR field and iid noise on the log scale (one draw of each)."""
    # Fixed order of draws (states, field, noise) so a generator gives one answer.
    states = counties["state_fips"].astype(str).to_numpy()
    state_codes, state_index = np.unique(states, return_inverse=True)
    state_effect = params.state_sd * rng.standard_normal(len(state_codes))[state_index]
    field = proper_car_field(adjacency, params.spatial_dependence, rng)
    spatial_effect = params.spatial_sd * field
    iid_effect = params.iid_sd * rng.standard_normal(len(counties))
    return state_effect, spatial_effect, iid_effect


def modelled_total(rate_per_100k: float, population) -> int:
    """Deaths of an age group modelled from a national rate: round(rate * 1e-5 * sum n).

    ``rate_per_100k`` is a national rate per 100,000 (e.g. a published 1980 rate) and
    ``population`` the age group's (modelled) county populations.
    """
    rate = float(rate_per_100k)
    if not (np.isfinite(rate) and rate > 0):
        raise ValueError(f"rate_per_100k must be a finite number > 0, got {rate_per_100k!r}")
    sizes = np.asarray(population, dtype=float)
    if sizes.size == 0 or not np.all(np.isfinite(sizes) & (sizes >= 0)) or sizes.sum() <= 0:
        raise ValueError("population must be finite, >= 0 and not all zero")
    total = int(round(rate * 1e-5 * sizes.sum()))
    if total < 1:
        raise ValueError(
            f"rate {rate} per 100,000 on {sizes.sum():g} people gives no deaths; "
            "expected a total of at least 1"
        )
    return total


def model_truth_related(
    counties: pd.DataFrame,
    edges: pd.DataFrame,
    population: pd.Series,
    reference: pd.DataFrame,
    params: TruthModel,
    correlation: float,
    rng: np.random.Generator,
) -> pd.DataFrame:
    """Modelled true rates of another age group whose map is related to ``reference``'s.

    Used for Study 1's Appendix C (ages 45-54 ... 85+): the paper fitted its truth with a
    multivariate CAR across age groups, so the geography of the groups is shared but not
    identical. Here, with ``r_i`` the centred log rate of the reference truth (the 35-44
    truth, a :func:`model_truth` or :func:`truth_from_wonder` frame with ``fips, rate``)
    and ``x_i`` an independent draw of the same model as :func:`model_truth` (state effect
    + proper CAR field + iid noise with the scales of ``params``),

        log(rate_i) = mu + rho * r_i + sqrt(1 - rho^2) * x_i,

    ``rho = correlation`` in [-1, 1]. When the reference is itself modelled with
    ``params``, the new relative log rates have the same distribution as the reference's
    and correlation ``rho`` with them (over draws; across the counties of one draw the
    sample correlation scatters around ``rho``). ``mu`` is solved so that
    sum_i n_i rate_i = ``params.total_deaths`` (use :func:`modelled_total`).

    Returns ``fips, population, rate, expected`` plus the log-scale components
    ``reference_effect`` (rho * r), ``state_effect``, ``spatial_effect``, ``iid_effect``
    (each already multiplied by sqrt(1 - rho^2)) and ``log_national`` (mu).
    """
    rho = float(correlation)
    if not (np.isfinite(rho) and -1 <= rho <= 1):
        raise ValueError(f"correlation must be in [-1, 1], got {correlation!r}")
    fips = counties["fips"].astype(str).reset_index(drop=True)
    sizes = _aligned_population(population, fips)
    for column in ("fips", "rate"):
        if column not in reference.columns:
            raise ValueError(f"reference truth: missing column {column!r}; expected fips, rate")
    ref = reference.assign(fips=reference["fips"].astype(str))
    if ref["fips"].duplicated().any():
        raise ValueError("reference truth: FIPS appear more than once; expected one row each")
    absent = fips[~fips.isin(ref["fips"])]
    if len(absent):
        raise ValueError(
            f"reference truth: no rate for {len(absent)} county(ies), e.g. "
            f"{absent.head(5).tolist()}; expected one per county"
        )
    ref_rate = ref.set_index("fips")["rate"].reindex(fips).to_numpy(dtype=float)
    if not np.all(np.isfinite(ref_rate) & (ref_rate > 0)):
        raise ValueError("reference truth: rates must be finite and > 0")
    log_ref = np.log(ref_rate)
    reference_effect = rho * (log_ref - log_ref.mean())

    adjacency = queen_adjacency(edges, fips)
    own = np.sqrt(1.0 - rho**2)
    state_effect, spatial_effect, iid_effect = (
        own * effect for effect in _relative_effects(counties, adjacency, params, rng)
    )
    return _scaled_truth(
        fips,
        sizes,
        params.total_deaths,
        reference_effect=reference_effect,
        state_effect=state_effect,
        spatial_effect=spatial_effect,
        iid_effect=iid_effect,
    )


def _aligned_population(population: pd.Series, fips: pd.Series) -> np.ndarray:
    population = pd.Series(population)
    population.index = population.index.astype(str)
    absent = fips[~fips.isin(population.index)]
    if len(absent):
        raise ValueError(
            f"population: no size for {len(absent)} county(ies), e.g. {absent.head(5).tolist()}; "
            "expected one per county"
        )
    if not population.index.is_unique:
        raise ValueError("population: FIPS index has duplicates; expected one size per county")
    sizes = population.reindex(fips).to_numpy(dtype=float)
    bad = ~(np.isfinite(sizes) & (sizes > 0))
    if bad.any():
        raise ValueError(
            f"population: non-positive or missing size for {fips[bad].head(5).tolist()}; "
            "expected sizes > 0"
        )
    return sizes


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
    """True rates as smoothed observed rates of a :func:`~dpsynth.data.read_wonder` frame.

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


def morans_i(values, adjacency: scipy.sparse.spmatrix) -> float:
    """Moran's I of ``values`` under the binary weights ``adjacency`` (0 when all equal).

    I = (n / S0) * sum_ij w_ij z_i z_j / sum_i z_i^2, z the centred values, S0 = sum w_ij.
    About -1/(n-1) for independent values; positive when neighbours are alike.
    """
    weights = scipy.sparse.csr_matrix(adjacency, dtype=float)
    centred = np.asarray(values, dtype=float) - np.mean(values)
    spread = centred @ centred
    if spread == 0 or weights.sum() == 0:
        return 0.0
    return float(len(centred) / weights.sum() * (centred @ (weights @ centred)) / spread)


def truth_summary(truth: pd.DataFrame, adjacency: scipy.sparse.spmatrix | None = None) -> dict:
    """Plain-number summary of a truth frame (for logs and docs): size, totals, spread.

    Rates per 100,000; quantiles are over counties (unweighted); ``national_rate`` is
    sum(expected) / sum(population). With ``adjacency`` (rows in the frame's order) it
    adds Moran's I of log(rate).
    """
    per_100k = truth["rate"].to_numpy(float) * PER_100K
    quantiles = (0.0, 0.05, 0.25, 0.5, 0.75, 0.95, 1.0)
    values = np.quantile(per_100k, quantiles)
    summary = {
        "counties": int(len(truth)),
        "population": float(truth["population"].sum()),
        "expected_deaths": float(truth["expected"].sum()),
        "national_rate_per_100k": float(
            PER_100K * truth["expected"].sum() / truth["population"].sum()
        ),
        "rate_per_100k_quantiles": {
            f"{q:g}": float(v) for q, v in zip(quantiles, values, strict=True)
        },
        "sd_log_rate": float(np.std(np.log(truth["rate"].to_numpy(float)))),
    }
    if adjacency is not None:
        summary["morans_i_log_rate"] = morans_i(np.log(truth["rate"].to_numpy(float)), adjacency)
    return summary
