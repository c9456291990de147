"""The noise-aware posterior of a release's true counts (issue #54, item 1b): from the M
synthetic sets and the public hyperparameters alone, the law of each group's true total.

**The likelihood.** Given the true counts y, a set z is drawn from a law known in closed
form (``docs/mechanisms.md``): md, the Dirichlet-multinomial DirMult(y., y + alpha); pg,
independent negative binomials NB(y_k + a_k, p_k), p_k = n_k / (b_k + 2 n_k), conditioned
on their sum y.; truncated, the same NBs of the clamped counts ~y_k = min(max(y_k, L_k),
U_k), each restricted to [L_k, U_k], conditioned on their sum. Each law is a product over
the strata of one factor per stratum, divided by a normaliser D(y):

* md: ``Gamma(z_k + y_k + alpha_k) / Gamma(y_k + alpha_k)``, and D depends on y only
  through its total y., which is public: the likelihood is exact;
* pg: ``Gamma(z_k + y_k + a_k) / Gamma(y_k + a_k) (1 - p_k)^y_k``, the stratum's NB as a
  function of y_k; D(y) = P(sum of the NBs = y. | y) depends on y only through y. when every
  p_k is the same, and is otherwise taken to (the approximation: cells independent given
  the total);
* truncated: the stratum's truncated NB, ``NB(z_k; ~y_k + a_k, p_k) / P(L_k <= Z <= U_k)``:
  the truncation's normaliser per stratum, the joint one (over the support with the total)
  dropped, the same approximation. Where y_k lies outside [L_k, U_k] the sets say only
  that it does: the likelihood is flat there (``docs/release.md``, what no method can do).

The M sets are independent given y, so a stratum's likelihood is the product of its M
factors (:func:`log_likelihood`).

**The prior** (:func:`log_prior`): the strata's true counts independent, each a
gamma-Poisson (negative binomial) of mean mu_k and shape s (``prior_shape``, default 1):
the stratum's rate has a gamma prior of mean the release's published prior rate and a
coefficient of variation 1/sqrt(s) (1 by default: a weak prior, a rate between a twentieth
and three times the prior rate at 90%). mu_k = population x prior rate (pg, truncated:
the ``population`` and ``prior_rate`` columns; with expected counts, E_k x the prior
relative risk); md publishes no prior rate, so mu_k = y. n_k / n. (the overall rate of
the public total). A count is at most its population where the denominator is one
(``cap``). The prior is the analyst's, not the mechanism's: a calibrated gamma shape a_k
is chosen for privacy (hundreds at a small epsilon) and is no one's belief.

**The posterior.** Prior times likelihood, stratum by stratum, on a grid of y from 0 to a
bound B (:func:`strata_posteriors`), then conditioned on the public total: the strata
are independent under prior x likelihood, so the true total y. is an observation and the
group G's total has the law ``P_G(s) P_rest(y. - s)`` (normalised), P_G the convolution
of G's strata and P_rest of the others' (:func:`group_posteriors`). Both are computed
exponentially tilted (every stratum's law times e^(theta y) with one theta that makes
the strata's means sum to y.): the tilt cancels in the conditioning, and puts the
convolutions' work where the total is, so the FFT's round-off (1e-16 of the largest
value) is far below what the answer uses. A group that is every stratum has its total
y. exactly.

**The grid's bound.** Every true count is at most the total y. (and its population where
that is the denominator): where that cap is small, the grid goes up to it and the
posterior is exact. Otherwise B starts at the largest of the prior's 1 - 1e-13 quantile,
the largest synthetic count and U_k + 1, and doubles until in every stratum not at its
cap the tilted posterior is decreasing at B with ratio r = p(B) / p(B - 1) and its mass
beyond B, at most p(B) r / (1 - r), is below 1e-12. The bound on the mass is exact when
the log posterior is concave beyond B: a prior of shape s >= 1 is log-concave, md's and
pg's factors are log-concave in y_k, and past U_k a truncated release's likelihood is
flat; hence ``prior_shape >= 1`` is required.
"""

from __future__ import annotations

import numpy as np

#: The posterior mass a stratum's grid may leave out beyond its bound (module docstring).
TAIL_MASS = 1e-12
#: A stratum's tilted law is trimmed where its tails hold less than this, before the
#: convolutions.
TRIM_MASS = 1e-16
#: The prior's upper quantile the grid's first bound covers.
PRIOR_QUANTILE = 1.0 - 1e-13


def prior_means(cal) -> np.ndarray:
    """mu_k, each stratum's prior expected count: population x prior rate, or (md, no
    prior rate published) the overall rate of the public total, y. n_k / n."""
    population = np.asarray(cal.population, dtype=float)
    if cal.prior_rate is None:
        return cal.total * population / population.sum()
    return population * np.asarray(cal.prior_rate, dtype=float)


def log_prior(cal, grid, prior_shape: float = 1.0) -> np.ndarray:
    """The log prior of each stratum's true count at ``grid`` (strata x grid), up to a
    constant a stratum: negative binomial of mean :func:`prior_means` and shape
    ``prior_shape``."""
    from scipy.special import gammaln

    mu = prior_means(cal)[:, None]
    y = np.asarray(grid, dtype=float)[None, :]
    s = float(prior_shape)
    return gammaln(y + s) - gammaln(y + 1.0) + y * (np.log(mu) - np.log(mu + s))


def log_likelihood(cal, sets, grid) -> np.ndarray:
    """The log likelihood of each stratum's true count at ``grid`` (strata x grid) from the
    synthetic ``sets`` (M x strata) drawn under ``cal``, up to a constant a stratum: the
    sum over the sets of the stratum's factor (module docstring)."""
    from scipy.special import betainc, gammaln

    from dpcounts.mechanisms.registry import family

    z = np.asarray(sets, dtype=float)
    if z.ndim != 2 or z.shape[1] != cal.n_cells:
        raise ValueError(f"sets must be M x {cal.n_cells} (sets x strata), got {z.shape}")
    y = np.asarray(grid, dtype=float)[None, :]
    if cal.truncated:
        y = np.clip(y, cal.lower[:, None], cal.upper[:, None])
    r = y + cal.a[:, None]  # the NB's size (md: the Dirichlet weight)
    out = -z.shape[0] * gammaln(r)
    for row in z:
        out += gammaln(row[:, None] + r)
    if not family(cal.mechanism).uses_prior:  # md: the Dirichlet-multinomial's factors
        return out
    log_fail = np.log1p(-np.exp(cal.log_success()))[:, None]  # log(1 - p_k)
    out += z.shape[0] * y * log_fail
    if cal.truncated:  # each stratum's truncation normaliser P(L <= Z <= U), Z ~ NB(r, p)
        p = np.exp(cal.log_success())[:, None]
        lower, upper = cal.lower[:, None].astype(float), cal.upper[:, None].astype(float)
        below = np.where(lower > 0, betainc(r, np.maximum(lower, 1.0), 1.0 - p), 0.0)
        by_cdf = betainc(r, upper + 1.0, 1.0 - p) - below  # cdf(U) - cdf(L - 1)
        by_sf = np.where(lower > 0, betainc(np.maximum(lower, 1.0), r, p), 1.0) - betainc(
            upper + 1.0, r, p)  # sf(L - 1) - sf(U): no cancellation near 1  # fmt: skip
        mass = np.where(below < 0.5, by_cdf, by_sf)
        out -= z.shape[0] * np.log(mass)
    return out


def strata_posteriors(cal, sets, prior_shape: float = 1.0, cap=None):
    """Each stratum's log posterior (prior x likelihood) on the grid 0..B (module
    docstring), before the total is conditioned on: ``(grid, log_post, theta)``, log_post
    strata x grid (-inf beyond a stratum's cap) and theta the tilt that makes the tilted
    strata's means sum to the total. ``cap``: each count's largest value (default the
    total)."""
    from scipy import stats

    if not (np.isfinite(prior_shape) and prior_shape >= 1):
        raise ValueError(f"prior_shape must be at least 1 (a log-concave prior), got "
                         f"{prior_shape!r}")  # fmt: skip
    sets = np.asarray(sets)
    total = int(cal.total)
    limit = np.full(cal.n_cells, total, dtype=np.int64)
    if cap is not None:
        limit = np.minimum(limit, np.floor(np.asarray(cap, dtype=float)).astype(np.int64))
    mu = prior_means(cal)
    q = mu / (mu + prior_shape)
    start = max(float(np.max(stats.nbinom.ppf(PRIOR_QUANTILE, prior_shape, 1.0 - q))),
                float(sets.max(initial=0)), 16.0)  # fmt: skip
    if cal.truncated:
        start = max(start, float(cal.upper.max()) + 1.0)
    bound = int(min(start, limit.max()))
    while True:
        grid = np.arange(bound + 1)
        log_post = log_prior(cal, grid, prior_shape) + log_likelihood(cal, sets, grid)
        log_post[grid[None, :] > limit[:, None]] = -np.inf
        if np.minimum(limit, bound).sum() < total:  # the grid cannot hold the total yet
            bound = int(min(2 * bound, limit.max()))
            continue
        theta = _tilt(grid, log_post, total)
        open_ = limit > bound  # strata whose grid ends before their cap
        if not open_.any() or _tails_small(log_post[open_] + theta * grid, TAIL_MASS):
            return grid, log_post, theta
        bound = int(min(2 * bound, limit.max()))


def _tilted(grid, log_post, theta) -> np.ndarray:
    """Each stratum's tilted law, normalised (strata x grid)."""
    w = log_post + theta * grid[None, :]
    w = np.exp(w - w.max(axis=1, keepdims=True))
    return w / w.sum(axis=1, keepdims=True)


def _tilt(grid, log_post, total: int) -> float:
    """The theta at which the tilted strata's means sum to ``total`` (Newton's method,
    kept inside a bracket that halves where a step leaves it)."""
    lo, hi, theta = -50.0, 50.0, 0.0
    for _ in range(200):
        w = _tilted(grid, log_post, theta)
        mean = w @ grid
        gap = mean.sum() - total
        if abs(gap) < 1e-9 * max(total, 1):
            return theta
        if gap > 0:
            hi = theta
        else:
            lo = theta
        spread = (w @ grid.astype(float) ** 2 - mean**2).sum()
        step = theta - gap / spread if spread > 0 else np.nan
        theta = step if lo < step < hi else (lo + hi) / 2
        if hi - lo < 1e-15:
            return theta
    return theta


def _tails_small(log_w, tail: float) -> bool:
    """Whether every row's law (log weights, the last column the bound B) is decreasing
    at B and puts at most ``tail`` beyond it (geometric bound, module docstring)."""
    last, before = log_w[:, -1], log_w[:, -2]
    norm = np.logaddexp.reduce(log_w, axis=1)
    ratio = np.exp(last - before)
    mass = np.exp(last - norm) * ratio / np.maximum(1.0 - ratio, 1e-300)
    return bool(np.all((ratio < 1.0) & (mass <= tail)))


def _trimmed(pmf) -> tuple[int, np.ndarray]:
    """(offset, values): ``pmf`` without its tails of mass below :data:`TRIM_MASS`."""
    cdf = np.cumsum(pmf)
    lo = int(np.searchsorted(cdf, TRIM_MASS))
    hi = int(np.searchsorted(cdf, cdf[-1] - TRIM_MASS)) + 1
    return lo, pmf[lo : max(hi, lo + 1)]


def _convolve(a, b):
    """The law of the sum of two independent counts given as (offset, values)."""
    from scipy.signal import convolve

    values = np.clip(convolve(a[1], b[1], method="auto"), 0.0, None)
    return a[0] + b[0], values / values.sum()


def _sum_of(laws):
    """The law of the sum of independent counts, by a balanced tree of convolutions."""
    laws = list(laws) or [(0, np.ones(1))]
    while len(laws) > 1:
        laws = [_convolve(laws[i], laws[i + 1]) if i + 1 < len(laws) else laws[i]
                for i in range(0, len(laws), 2)]  # fmt: skip
    return laws[0]


def group_posteriors(cal, sets, codes, prior_shape: float = 1.0, cap=None):
    """The posterior law of each group's true total given the sets and the public total:
    a list, group by group (``codes``: each stratum's group, 0..G-1), of ``(offset,
    pmf)`` with pmf[j] the probability that the group holds offset + j events."""
    codes = np.asarray(codes)
    grid, log_post, theta = strata_posteriors(cal, sets, prior_shape, cap)
    strata = [_trimmed(row) for row in _tilted(grid, log_post, theta)]
    groups = int(codes.max()) + 1
    laws = [_sum_of(strata[k] for k in np.flatnonzero(codes == g)) for g in range(groups)]
    before = [(0, np.ones(1))]  # before[g]: the law of groups 0..g-1 together
    for law in laws[:-1]:
        before.append(_convolve(before[-1], law))
    after = [(0, np.ones(1))]  # after[j]: the law of the last j groups together
    for law in laws[:0:-1]:
        after.append(_convolve(after[-1], law))
    out = []
    for g, (offset, pmf) in enumerate(laws):
        rest_offset, rest = _convolve(before[g], after[groups - 1 - g])
        at = cal.total - (offset + np.arange(pmf.size)) - rest_offset  # rest's index
        inside = (at >= 0) & (at < rest.size)
        weight = np.where(inside, pmf * rest[np.clip(at, 0, rest.size - 1)], 0.0)
        if not weight.sum() > 0:
            raise ValueError(f"group {g}: no value of its total agrees with the public total "
                             f"{cal.total} (the grids hold no common value)")  # fmt: skip
        lo, values = _trimmed(weight / weight.sum())
        out.append((offset + lo, values))
    return out


def summarise(laws, denominators, per: float, level: float) -> dict:
    """Each group's rate, ``count / denominator x per``, from its law (``(offset, pmf)``):
    the posterior mean (``estimate``), its variance, and the equal-tailed interval at
    ``level`` (the quantiles of the discrete law: the smallest s with P(total <= s) at
    least (1 - level) / 2, and at least (1 + level) / 2)."""
    out = {name: np.empty(len(laws)) for name in ("estimate", "variance", "lower", "upper")}
    for g, (offset, pmf) in enumerate(laws):
        scale = per / float(denominators[g])
        values = (offset + np.arange(pmf.size)) * scale
        mean = float(pmf @ values)
        cdf = np.cumsum(pmf)
        lo = min(int(np.searchsorted(cdf, (1 - level) / 2)), pmf.size - 1)
        hi = min(int(np.searchsorted(cdf, (1 + level) / 2)), pmf.size - 1)
        out["estimate"][g], out["variance"][g] = mean, float(pmf @ (values - mean) ** 2)
        out["lower"][g], out["upper"][g] = values[lo], values[hi]
    return out


__all__ = ["group_posteriors", "log_likelihood", "log_prior", "prior_means",
           "strata_posteriors", "summarise"]  # fmt: skip
