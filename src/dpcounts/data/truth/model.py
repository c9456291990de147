"""Study 1's modelled true county rates (Quick (2021), section 3.1, and Appendix C).

**Modelled truth** (:func:`model_truth`, the default). On the real populations n_i,

    log(rate_i) = mu + s_state(i) + phi_i + e_i,

- ``s`` iid Normal(0, state_sd^2), one per state;
- ``phi`` a proper CAR Gaussian Markov random field on the queen graph: precision
  ``D - rho W`` (W the 0/1 adjacency, D its degrees, 0 <= rho < 1 the spatial
  dependence), drawn exactly from a dense Cholesky factor (O(n^3), fine for the few
  thousand counties of the US, and computed once per graph and dependence in a process:
  :func:`car_factor`), then multiplied by ``spatial_sd / sqrt(v)`` where ``v`` is
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
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, fields

import numpy as np
import pandas as pd
import scipy.linalg
import scipy.sparse
from scipy.special import logsumexp

from dpcounts.data.counties import queen_adjacency


@dataclass(frozen=True)
class TruthModel:
    """Parameters of the modelled truth (see the module docstring for the model).

    Its values are the config's (``truth.model``, whose defaults the schema holds): this
    project's choices, not the paper's (the paper does not report its fitted variances): a
    state effect, a strongly dependent spatial field and a little county noise, so the map
    shows regional patterns as posterior medians of a spatial model would. The log-scale
    variance of a rate is about state_sd^2 + spatial_sd^2 + iid_sd^2; the workflow's
    summary JSON reports the spread the defaults produce.
    """

    total_deaths: float
    state_sd: float
    spatial_sd: float
    spatial_dependence: float
    iid_sd: float

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
        """Build from the config's ``truth.model`` mapping (defaults filled by the schema);
        unknown or missing keys are an error."""
        known = {field.name for field in fields(cls)}
        unknown = sorted(set(section) - known)
        if unknown:
            raise ValueError(f"truth.model: unknown key(s) {unknown}; expected {sorted(known)}")
        missing = sorted(known - set(section))
        if missing:
            raise ValueError(f"truth.model: missing key(s) {missing} (the schema fills them)")
        return cls(**{key: float(value) for key, value in section.items()})


@dataclass(frozen=True, eq=False)
class CarFactor:
    """A proper CAR field's fixed part: the Cholesky factor ``lower`` of its precision
    (read-only) and ``scale``, the square root of the geometric mean of its marginal
    variances. :func:`car_factor` computes it once per graph and dependence in a process."""

    lower: np.ndarray
    scale: np.float64

    def draw(self, rng: np.random.Generator, size: int | None = None) -> np.ndarray:
        """Draw(s) of the field scaled by ``1 / scale``: ``x = L^-T z / scale``, ``z``
        standard normal from ``rng`` (``(n, 1)`` or ``(n, size)`` variates, drawn first)."""
        count = self.lower.shape[0]
        normals = rng.standard_normal((count, 1 if size is None else size))
        draws = scipy.linalg.solve_triangular(self.lower.T, normals, lower=False).T
        draws /= self.scale
        return draws[0] if size is None else draws


class _Graph:
    """A CSR weight matrix, hashable by its shape and arrays' bytes: :func:`car_factor`'s
    memo key, so that the same graph built anew (each job's queen_adjacency) is a hit."""

    def __init__(self, weights: scipy.sparse.csr_matrix) -> None:
        self.weights = weights
        arrays = (weights.indptr, weights.indices, weights.data)
        self._key = (weights.shape, *((a.dtype.str, a.tobytes()) for a in arrays))

    def __hash__(self) -> int:
        return hash(self._key)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Graph) and self._key == other._key


def car_factor(adjacency: scipy.sparse.spmatrix, dependence: float) -> CarFactor:
    """The :class:`CarFactor` of the proper CAR with precision ``D - dependence * W``
    (islands, of degree 0, get precision 1), memoised: the dense Cholesky factor and the
    triangular inverse behind the scale are O(n^3) (about 3 s for the 3,085 counties), so
    a process drawing several fields on one graph computes them once. The memo keeps the
    last graph's factor only (n^2 doubles: 76 MB for the counties)."""
    weights = scipy.sparse.csr_matrix(adjacency, dtype=float)
    return _memoised_car_factor(_Graph(weights), float(dependence))


@functools.lru_cache(maxsize=1)
def _memoised_car_factor(graph: _Graph, dependence: float) -> CarFactor:
    weights = graph.weights
    degree = np.asarray(weights.sum(axis=1)).ravel()
    count = len(degree)
    diagonal = np.where(degree > 0, degree, 1.0)
    precision = (scipy.sparse.diags(diagonal) - dependence * weights).toarray()
    lower = scipy.linalg.cholesky(precision, lower=True)
    # marginal variances diag(Q^-1) = column sums of squares of L^-1
    inverse = scipy.linalg.solve_triangular(lower, np.eye(count), lower=True)
    marginal_variance = np.einsum("ij,ij->j", inverse, inverse)
    lower.flags.writeable = False
    return CarFactor(lower, np.sqrt(np.exp(np.mean(np.log(marginal_variance)))))


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
    The factor and the scale come from :func:`car_factor` (computed once per graph and
    dependence in a process); each draw takes only its standard normals from ``rng``.
    """
    return car_factor(adjacency, dependence).draw(rng, size)


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
