"""The noise-aware posterior of a release's true counts (issue #54, item 1b): from the M
synthetic sets and the public hyperparameters alone, the law of each group's true total.

**The likelihood.** Given the true counts y, a set z is drawn from a law known in closed
form (``docs/mechanisms.md``): md, the Dirichlet-multinomial DirMult(y., y + alpha); pg,
independent negative binomials NB(y_k + a_k, p_k), p_k = n_k / (b_k + 2 n_k), conditioned
on their sum y.; truncated, the same NBs of the clamped counts ~y_k = min(max(y_k, L_k),
U_k), each restricted to [L_k, U_k], conditioned on their sum. Each law is a product over
the strata of one factor g_k(z_k; y_k) per stratum over a normaliser D(y), the sum of that
product over every table z the release can draw:

* md: ``g_k = Gamma(z_k + y_k + alpha_k) / Gamma(y_k + alpha_k)``, and D depends on y only
  through its total y., which is public: the likelihood is exact;
* pg and truncated: g_k is the stratum's NB, ``Gamma(z_k + r_k) / (Gamma(r_k) z_k!) p_k^z_k
  (1 - p_k)^r_k`` with r_k = ~y_k + a_k, and D(y) couples the strata. It is replaced by its
  saddle-point form (the approximation, "cells independent given the total"): with a tilt
  phi, D(y) = e^(-phi y.) sum_z prod_k g_k(z_k) e^(phi z_k) is about e^(-phi y.) prod_k
  M_k(phi; r_k), M_k the sum of g_k e^(phi z) over the stratum's support, when phi makes
  the tilted strata's means sum to y. (:func:`_normaliser_tilt`, at the posterior means
  of ~y; the next rounds recompute both until phi settles). A stratum's factor is then
  g_k / M_k(phi; r_k): for pg ``Gamma(z + r) / Gamma(r) (1 - p e^phi)^r`` (exact when
  every p_k is the same: D then depends on y. alone), for truncated ``Gamma(z + r)`` over
  ``sum_{L <= x <= U} Gamma(x + r) (p e^phi)^x / x!`` (phi = 0: the truncated NB). The
  tilt matters where the truncation bites: with phi = 0 a truncated release whose true
  counts often lie outside its bounds is read wrongly (on the simulated tables of
  ``tests/test_estimate_posterior.py`` its intervals covered about 0.77 of the true
  rates, with the tilt 0.89). Where y_k lies outside [L_k, U_k] the sets say only that it
  does: the likelihood is flat there (``docs/release.md``, what no method can do).

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
is chosen for privacy (hundreds at a small epsilon) and is no one's belief. A truncated
release's sets say nothing of a count beyond its bounds, so there the posterior is the prior;
its prior beyond them holds the design's word (:func:`_design_tail`): a count lies below
L_k, or above U_k, with probability at most tail / 2, as the bounds were made (Quick 2022,
eq 8). The weak prior alone put far more there, and the public total took that excess from
the strata the sets inform (pennLC's three truncated arms, 90% intervals of the areas'
rates from 5 sets at epsilon 1.1 to 4: 0.69-0.89 coverage with the weak prior alone,
0.86-0.92 with the design's tail; ``results/studies/pennlc/coverage.parquet``). Truths that
the bounds often miss are then what the posterior does not expect
(``tests/test_estimate_posterior.py``).

**The posterior.** Prior times likelihood, stratum by stratum, on a grid of y from 0 to a
bound B (:func:`strata_posteriors`), then conditioned on the public total: the strata
are independent under prior x likelihood, so the true total y. is an observation and the
group G's total has the law ``P_G(s) P_rest(y. - s)`` (normalised), P_G the convolution
of G's strata and P_rest of the others' (:func:`group_posteriors`). Both are computed
exponentially tilted (every stratum's law times e^(theta y) with one theta that makes
the strata's means sum to y.): the tilt cancels in the conditioning, and puts the
convolutions' work where the total is, so the FFT's round-off (1e-16 of the largest
value; ``scipy.signal.convolve`` chooses FFT or direct sums by size) is far below what the
answer uses; each law is trimmed of tails below 1e-16. A group that is every stratum has its total
y. exactly.

**Measures of several pieces** (:func:`joint_draws`): an age-adjusted rate weighs a
group's age bands differently, and a disparity divides one side's rate by another's, so
neither is a function of one group's total. Their posterior is taken by Monte Carlo from
the joint law of the pieces' totals (a group's age bands, a disparity's sides) given the
public total, drawn exactly piece by piece from the same strata laws (each piece's law given
the later pieces' and the rest's convolution; by rejection from the piece's own law where
that convolution is broad, by inversion of the exact conditional cdf where it is not:
:func:`draws_from_laws`): the draws carry no approximation beyond the
strata's (cells independent given the total, the normaliser's saddle point), only their
Monte Carlo error (``dpcounts.release.estimate``: the number of draws and what it gives).

**The grid's bound.** Every true count is at most the total y. (and its population where
that is the denominator): where that cap is small, a stratum's grid goes up to it and its
posterior is exact. Otherwise the stratum's bound B_k starts at the power of 2 at or above
twice the largest of its prior mean, its largest synthetic count and 8 (and above U_k),
and doubles until the tilted posterior is decreasing at B_k with ratio r = p(B_k) / p(B_k
- 1) and its mass beyond B_k, at most p(B_k) r / (1 - r), is below 1e-12 (strata of one
bound share a grid). The bound on the mass is exact when the log posterior is concave
beyond B_k: a prior of shape s >= 1 is log-concave, md's and pg's factors are log-concave
in y_k, and past U_k a truncated release's likelihood is flat; hence ``prior_shape >= 1``
is required. A table of 1,072 strata (pennLC's size) takes 1 to 5 s, 3,000 strata 6 to 15
s (md fastest, truncated slowest).
"""

from __future__ import annotations

import numpy as np

#: The posterior mass a stratum's grid may leave out beyond its bound (module docstring).
TAIL_MASS = 1e-12
#: A stratum's tilted law is trimmed where its tails hold less than this, before the
#: convolutions.
TRIM_MASS = 1e-16
#: Values x support that :func:`joint_draws` weighs at once (memory: 8 bytes each, a few
#: arrays of it).
DRAW_CHUNK = 1_000_000
#: Rounds of the normaliser's tilt phi (module docstring) and the change that ends them.
NORMALISER_STEPS, NORMALISER_TOLERANCE = 50, 1e-7


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
    ``prior_shape``; a truncated release's beyond its bounds thinned to the design's tail
    (:func:`_design_tail`)."""
    out = _log_prior_at(prior_means(cal), grid, prior_shape)
    if cal.truncated:
        out += _design_tail(prior_means(cal), grid, prior_shape, cal.lower, cal.upper,
                            design_tail(cal))  # fmt: skip
    return out


def design_tail(cal) -> float:
    """The tail a truncated release's bounds were made with (its own, or the paper's rule
    of thumb for its size, :func:`dpcounts.mechanisms.truncation.default_tail`)."""
    from dpcounts.mechanisms.truncation import default_tail

    return float(cal.tail) if cal.tail is not None else default_tail(cal.n_cells)


def _log_prior_at(mu, grid, prior_shape: float) -> np.ndarray:
    from scipy.special import gammaln

    mu = np.asarray(mu, dtype=float)[:, None]
    y = np.asarray(grid, dtype=float)[None, :]
    s = float(prior_shape)
    return gammaln(y + s) - gammaln(y + 1.0) + y * (np.log(mu) - np.log(mu + s))


def _design_tail(mu, grid, prior_shape: float, lower, upper, tail: float) -> np.ndarray:
    """What a truncated release's prior adds (strata x grid, in logs) so that a true count
    lies below its stratum's L_k, or above its U_k, with prior probability at most
    ``tail`` / 2 each: the design's own statement (Quick 2022, eq 8: the bounds are the
    Poisson quantiles of the prior expected count at tail / 2 and 1 - tail / 2).

    The sets say nothing of a count beyond the bounds (its likelihood is flat there), so
    beyond them the posterior is the prior. The weak prior alone puts far more there (shape
    1: about e^(-U / mu) above U, against the design's tail / 2 of 1 / (2 I)), and summed
    over the strata its excess is taken, through the public total, from the strata the
    sets do inform (the module docstring's numbers, from pennLC's coverage). Where the weak
    prior already puts less than tail / 2 beyond a bound it is kept; the prior's shape
    within the bounds is unchanged."""
    from scipy import stats

    mu = np.asarray(mu, dtype=float)
    s = float(prior_shape)
    law = stats.nbinom(s, s / (s + mu))
    lower, upper = np.asarray(lower), np.asarray(upper)
    below = np.where(lower > 0, law.cdf(lower - 1), 0.0)
    above = law.sf(upper)
    keep_below, keep_above = np.minimum(below, tail / 2), np.minimum(above, tail / 2)
    inside = np.maximum(1.0 - below - above, 1e-300)
    with np.errstate(divide="ignore", invalid="ignore"):
        w_in = np.log((1.0 - keep_below - keep_above) / inside)
        w_below = np.where(below > 0, np.log(keep_below / below), 0.0)
        w_above = np.where(above > 0, np.log(keep_above / above), 0.0)
    y = np.asarray(grid)[None, :]
    return np.where(y < lower[:, None], w_below[:, None],
                    np.where(y > upper[:, None], w_above[:, None], w_in[:, None]))  # fmt: skip


def log_likelihood(cal, sets, grid, tilt: float = 0.0) -> np.ndarray:
    """The log likelihood of each stratum's true count at ``grid`` (strata x grid) from the
    synthetic ``sets`` (M x strata) drawn under ``cal``, up to a constant a stratum: the
    sum over the sets of the stratum's factor over its normaliser at ``tilt`` (phi, module
    docstring; 0: the stratum's NB alone, or truncated, its truncated NB)."""
    from scipy.special import gammaln

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
    log_p = cal.log_success()[:, None]
    if not cal.truncated:  # (1 - p)^r over M(phi; r) = ((1 - p) / (1 - p e^phi))^r
        return out + z.shape[0] * r * np.log1p(-np.exp(log_p + tilt))
    # truncated: Gamma(z + r) over sum_{L <= x <= U} Gamma(x + r) (p e^phi)^x / x!, the
    # normaliser of each clamped value once, then spread over the grid
    values = cal.lower[:, None] + np.arange(int((cal.upper - cal.lower).max()) + 1)[None, :]
    sizes = np.minimum(values, cal.upper[:, None]) + cal.a[:, None]
    norm = _log_normaliser(sizes, log_p[:, 0] + tilt, cal.lower, cal.upper)
    at = (y - cal.lower[:, None]).astype(np.int64)
    return out + z.shape[0] * (gammaln(r) - np.take_along_axis(norm, at, axis=1))


#: Strata x sizes x support the truncated normaliser sums at once (memory, 8 bytes each).
NORMALISER_CHUNK = 4_000_000


def _log_normaliser(sizes, log_q, lower, upper) -> np.ndarray:
    """log sum over x = L_k..U_k of Gamma(x + r) q_k^x / x!, for each stratum k (rows) and
    size r (``sizes``, strata x sizes), ``log_q`` = log q_k: summed directly, in log
    space (no underflow however far q is from the data)."""
    from scipy.special import gammaln, logsumexp

    width = int((upper - lower).max()) + 1
    out = np.empty(sizes.shape)
    rows = max(1, NORMALISER_CHUNK // (sizes.shape[1] * width))
    for start in range(0, sizes.shape[0], rows):
        part = slice(start, start + rows)
        x = lower[part, None] + np.arange(width)[None, :]  # strata x support
        terms = gammaln(x[:, None, :] + sizes[part, :, None]) + (
            x * log_q[part, None] - gammaln(x + 1.0))[:, None, :]  # fmt: skip
        terms[np.broadcast_to((x > upper[part, None])[:, None, :], terms.shape)] = -np.inf
        out[part] = logsumexp(terms, axis=2)
    return out


def _normaliser_tilt(cal, clamped_mean) -> float:
    """phi: the tilt at which the strata's (truncated) NBs of sizes ``clamped_mean`` + a,
    success probabilities p_k e^phi, have means summing to the total (bisection; pg keeps
    p_k e^phi below 1, truncated's finite support takes any phi in [-50, 50]). 0 for md
    (its normaliser needs none)."""
    from scipy.special import gammaln

    from dpcounts.mechanisms.registry import family

    if not family(cal.mechanism).uses_prior:
        return 0.0
    p = np.exp(cal.log_success())
    r = np.asarray(clamped_mean, dtype=float) + cal.a
    if cal.truncated:
        width = int((cal.upper - cal.lower).max()) + 1
        support = cal.lower[:, None] + np.arange(width)[None, :]
        inside = support <= cal.upper[:, None]
        base = gammaln(support + r[:, None]) - gammaln(support + 1.0)
        base[~inside] = -np.inf

    def mean(phi: float) -> float:
        tilted = p * np.exp(phi)
        if not cal.truncated:
            return float(np.sum(r * tilted / (1.0 - tilted)))
        w = base + support * np.log(tilted)[:, None]
        w = np.exp(w - w.max(axis=1, keepdims=True))
        return float(np.sum((w * support).sum(axis=1) / w.sum(axis=1)))

    if cal.truncated:  # a finite support: any phi (within exp's range)
        lo, hi = -50.0, 50.0
    else:  # p e^phi < 1 in every stratum
        hi = -float(np.log(p.max())) - 1e-9
        lo = hi - 50.0
    if mean(lo) >= cal.total:
        return lo
    if mean(hi) <= cal.total:
        return hi
    for _ in range(100):
        mid = (lo + hi) / 2
        if mean(mid) < cal.total:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-12:
            break
    return (lo + hi) / 2


def strata_posteriors(cal, sets, prior_shape: float = 1.0, cap=None):
    """Each stratum's log posterior (prior x likelihood) on its grid 0..B_k (module
    docstring), before the total is conditioned on: ``(buckets, theta)``. ``buckets`` is a
    list of ``(strata, grid, log_post)``, the strata (indices) that share one bound (a
    power of 2, or their cap), log_post strata x grid (-inf beyond a stratum's cap);
    theta is the tilt that makes the tilted strata's means sum to the total. ``cap``: each
    count's largest value (default the total)."""
    if not (np.isfinite(prior_shape) and prior_shape >= 1):
        raise ValueError(f"prior_shape must be at least 1 (a log-concave prior), got "
                         f"{prior_shape!r}")  # fmt: skip
    sets = np.asarray(sets)
    total = int(cal.total)
    limit = np.full(cal.n_cells, total, dtype=np.int64)
    if cap is not None:
        limit = np.minimum(limit, np.floor(np.asarray(cap, dtype=float)).astype(np.int64))
    mu = prior_means(cal)
    tail = design_tail(cal) if cal.truncated else None
    start = 2.0 * np.maximum(np.maximum(mu, sets.max(axis=0, initial=0)), 8.0)
    if cal.truncated:
        start = np.maximum(start, cal.upper + 1.0)
    bound = np.minimum(2 ** np.ceil(np.log2(start)).astype(np.int64), limit)
    while np.minimum(limit, bound).sum() < total:  # the grids cannot hold the total yet
        bound = np.minimum(2 * bound, limit)
    phi, before = 0.0, None  # before: the last (phi, F(phi) - phi)
    for _ in range(NORMALISER_STEPS):
        buckets = []
        for value in np.unique(bound):
            strata = np.flatnonzero(bound == value)
            grid = np.arange(int(value) + 1)
            log_post = _log_prior_at(mu[strata], grid, prior_shape) + log_likelihood(
                _subset(cal, strata), sets[:, strata], grid, phi)  # fmt: skip
            if cal.truncated:
                log_post += _design_tail(mu[strata], grid, prior_shape, cal.lower[strata],
                                         cal.upper[strata], tail)  # fmt: skip
            log_post[grid[None, :] > limit[strata, None]] = -np.inf
            buckets.append((strata, grid, log_post))
        theta = _tilt(buckets, total)
        grow = np.zeros(cal.n_cells, dtype=bool)
        for strata, grid, log_post in buckets:  # strata whose grid ends before their cap
            open_ = limit[strata] > grid[-1]
            if open_.any():
                grow[strata[open_]] = ~_tails_small(log_post[open_] + theta * grid, TAIL_MASS)
        if grow.any():
            bound[grow] = np.minimum(2 * bound[grow], limit[grow])
            continue
        clamped_mean = np.empty(cal.n_cells)
        for strata, grid, log_post in buckets:
            values = grid[None, :] if not cal.truncated else np.clip(
                grid[None, :], cal.lower[strata, None], cal.upper[strata, None])  # fmt: skip
            clamped_mean[strata] = (_tilted(grid, log_post, theta) * values).sum(axis=1)
        gap = _normaliser_tilt(cal, clamped_mean) - phi
        if abs(gap) < NORMALISER_TOLERANCE:
            return buckets, theta
        # the fixed point phi = F(phi) by the secant method on F(phi) - phi
        step = gap if before is None or gap == before[1] else (
            -gap * (phi - before[0]) / (gap - before[1]))  # fmt: skip
        before, phi = (phi, gap), phi + step
    raise ValueError(f"the posterior's normaliser did not settle in {NORMALISER_STEPS} steps "
                     f"(tilt {phi:.6g})")  # fmt: skip


def _subset(cal, strata):
    """The calibration of some strata only (their hyperparameters; the same total)."""
    import dataclasses

    names = ("a", "b", "population", "prior_rate", "lower", "upper")
    return dataclasses.replace(cal, **{name: None if getattr(cal, name) is None else
                                       getattr(cal, name)[strata] for name in names})  # fmt: skip


def _tilted(grid, log_post, theta) -> np.ndarray:
    """Each stratum's tilted law, normalised (strata x grid)."""
    w = log_post + theta * grid[None, :]
    w = np.exp(w - w.max(axis=1, keepdims=True))
    return w / w.sum(axis=1, keepdims=True)


def _tilt(buckets, total: int) -> float:
    """The theta at which the tilted strata's means sum to ``total`` (Newton's method,
    kept inside a bracket that halves where a step leaves it)."""
    lo, hi, theta = -50.0, 50.0, 0.0
    for _ in range(200):
        mean = spread = 0.0
        for _strata, grid, log_post in buckets:
            w = _tilted(grid, log_post, theta)
            first = w @ grid
            mean += first.sum()
            spread += (w @ grid.astype(float) ** 2 - first**2).sum()
        gap = mean - total
        if abs(gap) < 1e-9 * max(total, 1):
            return theta
        if gap > 0:
            hi = theta
        else:
            lo = theta
        step = theta - gap / spread if spread > 0 else np.nan
        theta = step if lo < step < hi else (lo + hi) / 2
        if hi - lo < 1e-15:
            return theta
    return theta


def _tails_small(log_w, tail: float) -> np.ndarray:
    """Whether each row's law (log weights, the last column the bound B) is decreasing at
    B and puts at most ``tail`` beyond it (geometric bound, module docstring)."""
    last, before = log_w[:, -1], log_w[:, -2]
    norm = np.logaddexp.reduce(log_w, axis=1)
    ratio = np.exp(last - before)
    mass = np.exp(last - norm) * ratio / np.maximum(1.0 - ratio, 1e-300)
    return (ratio < 1.0) & (mass <= tail)


def _trimmed(pmf) -> tuple[int, np.ndarray]:
    """(offset, values): ``pmf`` without its tails of mass below :data:`TRIM_MASS`."""
    cdf = np.cumsum(pmf)
    lo = int(np.searchsorted(cdf, TRIM_MASS))
    hi = int(np.searchsorted(cdf, cdf[-1] - TRIM_MASS)) + 1
    return lo, pmf[lo : max(hi, lo + 1)]


def _convolve(a, b):
    """The law of the sum of two independent counts given as (offset, values), its tails
    below :data:`TRIM_MASS` trimmed."""
    from scipy.signal import convolve

    values = np.clip(convolve(a[1], b[1], method="auto"), 0.0, None)
    lo, values = _trimmed(values / values.sum())
    return a[0] + b[0] + lo, values / values.sum()


def _sum_of(laws):
    """The law of the sum of independent counts, by a balanced tree of convolutions."""
    laws = list(laws) or [(0, np.ones(1))]
    while len(laws) > 1:
        laws = [_convolve(laws[i], laws[i + 1]) if i + 1 < len(laws) else laws[i]
                for i in range(0, len(laws), 2)]  # fmt: skip
    return laws[0]


def strata_laws(cal, sets, prior_shape: float = 1.0, cap=None) -> list:
    """Each stratum's tilted posterior law before the total is conditioned on, trimmed
    (``(offset, pmf)``, stratum by stratum): the factors that :func:`group_posteriors` and
    :func:`joint_draws` convolve (the tilt cancels in the conditioning)."""
    buckets, theta = strata_posteriors(cal, sets, prior_shape, cap)
    strata = [None] * cal.n_cells
    for indices, grid, log_post in buckets:
        for k, row in zip(indices, _tilted(grid, log_post, theta), strict=True):
            strata[k] = _trimmed(row)
    return strata


def group_posteriors(cal, sets, codes, prior_shape: float = 1.0, cap=None):
    """The posterior law of each group's true total given the sets and the public total:
    a list, group by group (``codes``: each stratum's group, 0..G-1), of ``(offset,
    pmf)`` with pmf[j] the probability that the group holds offset + j events."""
    return group_laws(strata_laws(cal, sets, prior_shape, cap), int(cal.total), codes)


def group_laws(strata, total: int, codes):
    """:func:`group_posteriors` from the strata's laws (:func:`strata_laws`, computed once
    for several groupings) and the public ``total``."""
    codes = np.asarray(codes)
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
        at = total - (offset + np.arange(pmf.size)) - rest_offset  # rest's index
        inside = (at >= 0) & (at < rest.size)
        weight = np.where(inside, pmf * rest[np.clip(at, 0, rest.size - 1)], 0.0)
        if not weight.sum() > 0:
            raise ValueError(f"group {g}: no value of its total agrees with the public total "
                             f"{total} (the grids hold no common value)")  # fmt: skip
        lo, values = _trimmed(weight / weight.sum())
        out.append((offset + lo, values))
    return out


def joint_draws(cal, sets, pieces, draws: int, rng, prior_shape: float = 1.0,
                cap=None) -> np.ndarray:  # fmt: skip
    """``draws`` joint draws (draws x P) of the true totals of P disjoint pieces of the
    table (``pieces``: each stratum's piece, 0..P-1, or -1 for none) from the posterior
    conditioned on the public total: exact sampling, piece by piece. With P_j the law of
    piece j (the convolution of its strata's laws) and S_j that of every later piece and
    the strata of no piece together, piece j takes x with probability proportional to
    P_j(x) S_j(t - x), t the total less the earlier pieces' draws; so the draws are the
    joint posterior's, to the laws' trimming (:data:`TRIM_MASS`) and the random numbers
    ``rng`` (a numpy Generator) alone."""
    pieces = np.asarray(pieces)
    if pieces.shape != (cal.n_cells,):
        raise ValueError(f"pieces must give each of the {cal.n_cells} strata a piece, got "
                         f"shape {pieces.shape}")  # fmt: skip
    if not (isinstance(draws, int | np.integer) and draws >= 1):
        raise ValueError(f"draws must be a positive whole number, got {draws!r}")
    return draws_from_laws(strata_laws(cal, sets, prior_shape, cap), int(cal.total), pieces,
                           draws, rng)  # fmt: skip


def draws_from_laws(strata, total: int, pieces, draws: int, rng) -> np.ndarray:
    """:func:`joint_draws` from the strata's laws (:func:`strata_laws`, computed once for
    several sets of pieces) and the public ``total``."""
    pieces = np.asarray(pieces)
    count = int(pieces.max()) + 1
    laws = [_sum_of(strata[k] for k in np.flatnonzero(pieces == j)) for j in range(count)]
    suffix = [_sum_of(strata[k] for k in np.flatnonzero(pieces < 0))]  # S_{P-1}: the rest
    for law in laws[:0:-1]:
        suffix.append(_convolve(law, suffix[-1]))
    suffix.reverse()  # suffix[j]: the law of the pieces after j and the rest together
    left = np.full(draws, int(total), dtype=np.int64)  # t, draw by draw
    out = np.empty((draws, count), dtype=np.int64)
    for j, ((offset, pmf), (rest_offset, rest)) in enumerate(zip(laws, suffix, strict=True)):
        at = np.full(draws, -1, dtype=np.int64)  # each draw's index into the piece's pmf
        pending = _by_rejection(at, left, offset, pmf, rest_offset, rest, rng)
        if pending.size:
            _by_inversion(at, pending, left, offset, pmf, rest_offset, rest, rng, j, total)
        out[:, j] = offset + at
        left -= out[:, j]
    return out


#: Rounds of :func:`_by_rejection` at most, and the share of a round's proposals it must
#: accept to go on (else the draws left are drawn by inversion).
REJECTION_ROUNDS, REJECTION_ACCEPTED = 30, 0.2


def _by_rejection(at, left, offset, pmf, rest_offset, rest, rng) -> np.ndarray:
    """Draws piece j's value x given t = ``left`` (P_j(x) S_j(t - x), normalised) by
    rejection, for every draw, into ``at`` (x - offset): propose x from P_j, accept with
    probability S_j(t - x) / E(t), E(t) the largest S_j(t - x') over the piece's support
    (a sliding maximum of S_j). Exact: an accepted proposal has the target law, whatever
    the rounds before it. Where S_j is broad against P_j (the early pieces, most of the
    work) nearly every proposal is accepted, at a cost of O(draws) a round where inversion
    costs O(draws x support). Returns the draws not accepted within the rounds (or left
    when a round accepts too few), for :func:`_by_inversion`."""
    from scipy.ndimage import maximum_filter1d

    size = pmf.size
    # window[i] = max(rest[i - size + 1 .. i]) (0 outside rest): E(t) = window[t - offset
    # - rest_offset]
    padded = np.concatenate([np.zeros(size - 1), rest, np.zeros(size - 1)])
    window = maximum_filter1d(padded, size, mode="constant", cval=0.0)
    window = window[size // 2 : size // 2 + rest.size + size - 1]
    cdf = np.cumsum(pmf)
    cdf[-1] = 1.0
    pending = np.arange(left.size)
    for _ in range(REJECTION_ROUNDS):
        if not pending.size:
            break
        t = left[pending] - offset - rest_offset
        inside = (t >= 0) & (t < window.size)
        bound = np.where(inside, window[np.clip(t, 0, window.size - 1)], 0.0)
        proposal = np.minimum(np.searchsorted(cdf, rng.random(pending.size), side="right"),
                              size - 1)  # fmt: skip
        k = t - proposal
        value = np.where((k >= 0) & (k < rest.size), rest[np.clip(k, 0, rest.size - 1)], 0.0)
        accept = (bound > 0) & (rng.random(pending.size) * bound < value)
        at[pending[accept]] = proposal[accept]
        share = accept.mean()
        pending = pending[~accept]
        if share < REJECTION_ACCEPTED:
            break
    return pending


def _by_inversion(at, pending, left, offset, pmf, rest_offset, rest, rng, j, total) -> None:
    """Draws piece j's value for the ``pending`` draws by the inverse of its exact
    conditional cdf given each draw's t = ``left``, into ``at``: the weights P_j(x) S_j(t -
    x) of every distinct t at once (O(distinct t x support))."""
    values, which = np.unique(left[pending], return_inverse=True)
    uniform = rng.random(pending.size)
    rows = max(1, DRAW_CHUNK // pmf.size)  # values x support computed at once
    for start in range(0, len(values), rows):
        part = values[start : start + rows]
        index = part[:, None] - offset - np.arange(pmf.size)[None, :] - rest_offset
        inside = (index >= 0) & (index < rest.size)
        weight = np.where(inside, pmf[None, :] * rest[np.clip(index, 0, rest.size - 1)], 0.0)
        sums = weight.sum(axis=1, keepdims=True)
        if not (sums > 0).all():
            raise ValueError(f"piece {j}: no value of its total agrees with the public "
                             f"total {total} (the grids hold no common value)")  # fmt: skip
        cdf = np.cumsum(weight / sums, axis=1)
        cdf[:, -1] = 1.0
        # the inverse cdf of each draw's row at once: rows k shifted to [k, k + 1]
        shifted = (cdf + np.arange(len(part))[:, None]).ravel()
        mine = np.flatnonzero((which >= start) & (which < start + len(part)))
        row = which[mine] - start
        found = np.searchsorted(shifted, row + uniform[mine], side="right")
        at[pending[mine]] = np.minimum(found - row * pmf.size, pmf.size - 1)


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


__all__ = ["draws_from_laws", "group_laws", "group_posteriors", "joint_draws",
           "log_likelihood", "log_prior", "prior_means", "strata_laws", "strata_posteriors",
           "summarise"]  # fmt: skip
