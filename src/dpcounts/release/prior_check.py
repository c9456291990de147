"""A prior that cannot be the data: refuse prior rates that reproduce the counts.

A prior column (``--prior FILE`` or the input's prior-rate column) is the steward's
declaration that the rates are public, made without these counts. The release publishes
them as they are, so a "prior" computed from the counts, such as ``(count + 0.5) /
population`` or a shrinkage estimate, publishes the counts: every count comes back from the
hyperparameters while the manifest states epsilon. No check can prove a prior public, but
one can tell a prior that fits the counts far better than chance allows.

The null hypothesis is the steward's own claim: the rates were fixed without these counts,
so each count is a draw around its expected count ``mu = population x prior_rate``
(binomial when the populations are whole and the rates below 1, Poisson otherwise, and
always Poisson when the denominators are expected counts, which bound nothing). A real
public prior (national or earlier rates, an overall rate, group rates) misses the counts
by *more* than this noise (places differ from the nation), never by far less. Two
statistics, each with its distribution under the null computed stratum by stratum:

* **agreement**: the number of strata with ``|mu - count| <= 1``. It is a sum of
  independent Bernoulli variables with the probabilities ``p_i`` of the null, and the
  Chernoff bound ``P(K >= k) <= exp(-m) (e m / k)^k`` (``m = sum p_i``) bounds its upper
  tail without approximation. Refused when that bound is below :data:`ALPHA`.
* **deviance**: ``D = sum_i d_i(count_i, mu_i)``, the deviance of the counts under the prior
  (how far the counts lie from their expected values, in the likelihood's own units).
  Refused when ``D`` lies more than :data:`Z_REFUSE` null standard deviations *below* its
  null mean (the mean and variance of each ``d_i`` enumerated exactly for ``mu_i <=``
  :data:`ENUMERATED_MEAN`, else the chi-square limit 1 + 1/(6 mu) and 2): the prior fits
  far better than noise around it allows.

A stratum's null depends only on its (population, rate) pair (on ``mu`` alone for
Poisson), and a real table has few distinct pairs (a public prior is a rate per age group,
say), so ``p_i`` and the moments of ``d_i`` are computed once per distinct pair, the
enumeration over the counts 0 .. ``mu + 12 sqrt(mu) + 20`` (beyond which the null
probability is below 1e-32) in blocks of at most :data:`BLOCK` values: time and memory
grow linearly with the strata even when every pair is distinct (``benchmarks/prior_check.py``).

Both tails are about 1e-9 under the null, so a public prior is refused by chance about
once in a billion tables. A table of a few strata cannot be told apart this way (six
counts may match their prior by chance), and a prior that is the data only in part
(shrinkage towards a group rate) may pass: the check catches the common accident, it
does not prove a prior public (docs/privacy.md, Part 5).

A grouped prior (one rate per group of key columns, :mod:`.prior_source`) made from the
counts misses each stratum by the strata's spread and passes these tests, while it gives
back every group's total; :func:`group_fit` asks the same question of the groups (exactly,
up to one factor, smoothed, and with the two statistics on the group totals).

The check reads the counts, so whether a release goes ahead depends on them: a refusal
before anything is spent, drawn or written, like the count-dependent refusal of
docs/privacy.md, Part 5, and said so there. The steward who knows the prior is public
(it was published before these counts existed) passes ``--prior-is-public-i-am-sure``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

#: Largest upper-tail probability of the agreement count that still passes.
ALPHA = 1e-9
#: How many null standard deviations below its null mean the deviance may lie.
Z_REFUSE = 6.0
#: Strata whose expected count is at most this have the deviance's moments enumerated.
ENUMERATED_MEAN = 30.0
#: A group's implied total ``k x sum(population x rate)`` counts as its count when within
#: this share of the count (of 1 event for a group of none): floating point and rates
#: printed to 7 or more significant digits (:func:`group_fit`).
EXACT_RTOL = 1e-6
#: The pseudo-counts of smoothed own rates ``(count_g + a) / population_g`` that
#: :func:`group_fit` looks for exactly whatever the number of groups.
PSEUDO_COUNTS = (0.5, 1.0)
#: Up to this many groups, the groups' totals are also tested for agreement within the
#: precision their rates are printed to, at most 1 event (:func:`group_fit`).
PRINTED_GROUPS = 10_000
#: The option that overrides the check (the steward's explicit word).
OVERRIDE = "--prior-is-public-i-am-sure"
#: Values (distinct pairs x counts enumerated) in one block of the enumeration: bounds the
#: check's memory whatever the table (4 MiB an array, about ten arrays).
BLOCK = 1 << 19
#: Strata whose deviance and agreement are summed at once (bounds their temporaries).
CHUNK = 1 << 18


def _support(mu: np.ndarray | float) -> np.ndarray:
    """The largest count enumerated for expected counts ``mu`` (at most ENUMERATED_MEAN):
    ``mu + 12 sqrt(mu) + 20``, beyond which the null probability is below 1e-32."""
    return np.ceil(np.asarray(mu) + 12.0 * np.sqrt(mu) + 20.0).astype(np.int64)


def _null(
    population: np.ndarray, rate: np.ndarray, poisson: bool = False
) -> tuple[np.ndarray, np.ndarray | None]:
    """The null distribution of the counts: the expected counts ``mu`` and the binomial's
    trials (the populations), or None for Poisson when the null cannot be binomial or
    ``poisson`` (the denominators are expected counts: relative risks, no trials)."""
    mu = population * rate
    if poisson:
        return mu, None
    whole = bool(np.all(population == np.round(population)) and np.all(rate < 1))
    return mu, (population if whole else None)


def deviance(counts: np.ndarray, mu: np.ndarray, n: np.ndarray | None) -> np.ndarray:
    """Each stratum's deviance of ``counts`` against the expected ``mu`` (binomial with
    ``n`` trials, or Poisson when ``n`` is None)."""
    from scipy import special  # here: scipy's import costs seconds (verify needs none)

    counts = np.asarray(counts, dtype=float)
    d = special.xlogy(counts, counts) - special.xlogy(counts, mu)
    if n is None:
        d = d - (counts - mu)
    else:
        rest, rest_mu = n - counts, n - mu
        d = d + special.xlogy(rest, rest) - special.xlogy(rest, rest_mu)
    return 2.0 * np.maximum(d, 0.0)


def _enumerated(mu: np.ndarray, n: np.ndarray | None) -> tuple[np.ndarray, ...]:
    """For a block of distinct nulls (expected counts ``mu <= ENUMERATED_MEAN``, ascending,
    with their trials ``n`` or None): the mean and variance of the deviance and the
    probability that the count lies within 1 of ``mu``, enumerated over the counts
    0..``_support(mu)`` (the probabilities in log space: scipy.stats's formula for
    Poisson, the falling factorial n (n-1) ... (n-k+1) summed in logs for the binomial)."""
    from scipy import special  # here: scipy's import costs seconds (verify needs none)

    top = int(_support(mu[-1]))
    if n is not None:
        top = min(top, int(n.max()))
    k = np.arange(top + 1, dtype=float)
    mu_b = mu[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        k_log_mu = np.multiply.outer(np.log(mu), k)  # xlogy(k, mu): 0 at k = 0
        k_log_mu[:, 0] = 0.0
        d = special.xlogy(k, k) - k_log_mu
        if n is None:
            d -= k - mu_b
            log_pmf = k_log_mu
            log_pmf -= special.gammaln(k + 1.0)
            log_pmf -= mu_b
        else:
            p = mu / n
            rest = n[:, None] - k  # < 0 beyond n, where the probability is 0
            log_rest = np.log(np.maximum(rest, 0.0))
            log_pmf = np.empty_like(rest)  # log of n (n-1) ... (n-k+1) / k!, then p's
            log_pmf[:, 0] = 0.0
            np.cumsum(log_rest[:, :-1], axis=1, out=log_pmf[:, 1:])
            log_pmf -= special.gammaln(k + 1.0)
            k_log_p = np.multiply.outer(np.log(p), k)
            k_log_p[:, 0] = 0.0
            log_pmf += k_log_p
            log_pmf += rest * np.log1p(-p)[:, None]
            rest_log_rest = rest * log_rest  # xlogy(rest, rest)
            rest_log_rest[rest == 0.0] = 0.0
            d += rest_log_rest
            d -= rest * np.log(n - mu)[:, None]
            d[rest < 0.0] = 0.0
        pmf = np.exp(log_pmf, out=log_pmf)
    np.maximum(d, 0.0, out=d)
    d *= 2.0
    weighted = pmf * d
    mean = weighted.sum(axis=1)
    weighted *= d
    var = np.maximum(weighted.sum(axis=1) - mean * mean, 0.0)
    low, high = np.ceil(mu - 1.0), np.floor(mu + 1.0)  # at most 3 counts, all <= top
    rows = np.arange(mu.size)
    agree = np.zeros(mu.size)
    for step in range(3):
        at = low + step
        inside = (at >= 0) & (at <= high) & (at <= top)
        agree += np.where(inside, pmf[rows, np.clip(at, 0, top).astype(np.int64)], 0.0)
    return mean, var, agree


def null_cdf(k: np.ndarray, mu: np.ndarray, n: np.ndarray | None, p: np.ndarray | None):
    """``scipy.stats.poisson.cdf(k, mu)`` (``n`` None), else ``scipy.stats.binom.cdf(k, n,
    p)``, to the bit, for valid parameters: the same kernels (``pdtr``, and the binomial's
    ``_binom_cdf`` that scipy.stats calls), 0 below the support, 1 at or past its end,
    clipped to [0, 1], without importing scipy.stats (about a second: most of a small
    release's checks). ``tests/test_release_prior_check_moments.py`` checks it against
    scipy.stats on random and edge arguments."""
    from scipy import special  # here: scipy's import costs seconds (verify needs none)

    k = np.floor(np.asarray(k, dtype=float))
    if n is None:
        cdf, end = special.pdtr(k, mu), np.inf
    else:
        from scipy.special import _ufuncs  # scipy.stats.binom's own kernel

        kernel = getattr(_ufuncs, "_binom_cdf", None)
        if kernel is None:  # pragma: no cover - another scipy: its public function
            from scipy import stats

            return stats.binom.cdf(k, n, p)
        cdf, end = kernel(k, n, p), n
    return np.where(k >= end, 1.0, np.where(k < 0, 0.0, np.clip(cdf, 0.0, 1.0)))


def _distinct_nulls(mu: np.ndarray, n: np.ndarray | None, rate: np.ndarray):
    """Per distinct null (a (population, rate) pair, or an expected count for Poisson):
    the deviance's null mean and variance and the agreement probability, and each
    stratum's index into them. Enumerated once per distinct null, in blocks of at most
    :data:`BLOCK` values: memory is bounded however many nulls are distinct."""
    if n is None:
        inverse, mu_u = pd.factorize(mu, use_na_sentinel=False)
        n_u = rate_u = None
    else:
        key = np.empty(mu.size, dtype=complex)
        key.real, key.imag = n, rate
        inverse, key = pd.factorize(key, use_na_sentinel=False)
        n_u, rate_u = key.real.copy(), key.imag.copy()
        mu_u = n_u * rate_u  # as mu = population x rate
        del key
    mean = 1.0 + 1.0 / (6.0 * np.maximum(mu_u, 1.0))
    var = np.full(mu_u.size, 2.0)
    agree = np.empty(mu_u.size)

    large = np.flatnonzero(mu_u > ENUMERATED_MEAN)
    if large.size:
        m = mu_u[large]
        trials = None if n is None else np.round(n_u[large]).astype(np.int64)
        p = None if n is None else rate_u[large]
        agree[large] = null_cdf(np.floor(m + 1.0), m, trials, p) - null_cdf(
            np.ceil(m - 1.0) - 1.0, m, trials, p
        )

    small = np.flatnonzero(mu_u <= ENUMERATED_MEAN)
    small = small[np.argsort(mu_u[small])]  # rows of like support in one block
    width = _support(mu_u[small]) + 1
    start = 0
    while start < small.size:
        # the block's widest row is its last: take as many rows as that width allows
        stop = min(small.size, start + BLOCK // int(width[start]))
        stop = start + max(1, BLOCK // int(width[stop - 1]))
        block = small[start:stop]
        mean[block], var[block], agree[block] = _enumerated(
            mu_u[block], None if n is None else n_u[block]
        )
        start = stop
    return mean, var, agree, inverse


def agreement_tail(agree: int, p: np.ndarray) -> float:
    """An upper bound on P(K >= agree) for K a sum of independent Bernoulli(p) (Chernoff)."""
    m = float(np.sum(p))
    if agree <= m:
        return 1.0
    return math.exp(min(0.0, -m + agree * (1.0 + math.log(m / agree)) if m > 0 else -math.inf))


def _fit(counts, population, rate, poisson: bool) -> str | None:
    """Which test says ``counts`` fit ``population x rate`` far better than chance allows
    ("agreement" or "deviance"), or None (the two statistics of the module docstring)."""
    mu, n = _null(population, rate, poisson)
    mean_u, var_u, agree_u, inverse = _distinct_nulls(mu, n, rate)
    p = agree_u[inverse]
    agree = 0
    for at in range(0, mu.size, CHUNK):
        part = slice(at, at + CHUNK)
        agree += int(np.count_nonzero(np.abs(mu[part] - counts[part].astype(float)) <= 1.0))
    if agreement_tail(agree, p) < ALPHA:
        return "agreement"
    del p
    mean, var = float(mean_u[inverse].sum()), float(var_u[inverse].sum())
    observed = 0.0
    for at in range(0, mu.size, CHUNK):
        part = slice(at, at + CHUNK)
        trials = None if n is None else n[part]
        observed += float(deviance(counts[part].astype(float), mu[part], trials).sum())
    if var > 0 and observed < mean - Z_REFUSE * math.sqrt(var):
        return "deviance"
    return None


def prior_reproduces_counts(counts, population, rate, *, poisson: bool = False) -> str | None:
    """Why the prior rates cannot be a prior made without these counts, or None.

    ``counts``, ``population`` and ``rate`` are per stratum (rates finite and > 0). The
    answer names the test, never a count or a statistic of them. ``poisson``: the null is
    Poisson whatever the denominators (expected counts, ``--expected-column``).
    """
    counts = np.asarray(counts)  # as float chunk by chunk
    population = np.asarray(population, dtype=float)
    rate = np.asarray(rate, dtype=float)
    test = _fit(counts, population, rate, poisson)
    if test == "agreement":
        return (
            "population x prior rate lies within 1 of the count in far more strata than "
            f"chance allows (p < {ALPHA:g} if the counts were drawn around the prior)"
        )
    if test == "deviance":
        return (
            "the counts lie far closer to population x prior rate than noise around a prior "
            f"allows (their deviance is more than {Z_REFUSE:g} standard deviations below "
            "its expected value)"
        )
    return None


@dataclass(frozen=True)
class GroupFinding:
    """Why a prior constant within groups looks like the table's own group rates
    (:func:`group_fit`): ``kind`` "exact", "smoothed" (plus a pseudo-count), "affine" (up
    to a factor and an offset) or "agreement"/"deviance" (closer than chance), with
    ``groups`` the index of one stratum of each group compared, to name them."""

    kind: str
    groups: np.ndarray
    factor: bool = False  # the match needed one fitted factor (exact, agreement, deviance)
    offset: float = 0.0  # the pseudo-count of "smoothed"


def _within(residual: np.ndarray, counts: np.ndarray) -> bool:
    """Whether every residual is below :data:`EXACT_RTOL` of its count (or of 1)."""
    return bool(np.all(np.abs(residual) <= EXACT_RTOL * np.maximum(counts, 1.0)))


def _agrees_within(counts, population, rate, window, poisson: bool) -> bool:
    """Whether far more ``counts`` lie within ``window`` of ``population x rate`` than
    chance allows (the agreement test with a window of its own per count, its Bernoulli
    probabilities from the exact null cdf; Chernoff bound below :data:`ALPHA`)."""
    mu, n = _null(population, rate, poisson)
    trials = None if n is None else np.round(n).astype(np.int64)
    p = None if n is None else rate
    inside = null_cdf(np.floor(mu + window), mu, trials, p) - null_cdf(
        np.ceil(mu - window) - 1.0, mu, trials, p
    )
    agree = int(np.count_nonzero(np.abs(mu - counts) <= window))
    return agreement_tail(agree, inside) < ALPHA


def _printed_precision(rates: np.ndarray) -> np.ndarray:
    """Per rate, half a unit of its last printed digit relative to the rate: a rate read
    from a file as ``0.0001234`` is known to 4 digits, within 0.5e-7 / 1.234e-4 of itself
    (the shortest text that reads back as the same float, ``repr``)."""
    out = np.empty(rates.size)
    for i, value in enumerate(rates.tolist()):
        mantissa = repr(float(value)).lower().split("e")[0].replace("-", "").replace(".", "")
        digits = max(1, len(mantissa.strip("0")))
        first = mantissa.lstrip("0")
        lead = float(first[0] + "." + first[1:]) if first else 1.0
        out[i] = 0.5 * 10.0 ** (1 - digits) / lead
    return out


def group_fit(counts, population, rate, codes, *, poisson: bool = False) -> GroupFinding | None:
    """Whether a prior constant within the groups ``codes`` is the table's own group rates.

    A grouped prior can carry each group's total: ``sum over the group of population x
    rate`` is the group's expected count ``mu_g``, published with the hyperparameters. When
    the rates are the table's own (``count_g / population_g``, scaled, smoothed), ``mu_g``
    gives back ``count_g``, and moving one event between two groups changes two published
    numbers: no epsilon holds. The stratum-by-stratum check (:func:`prior_reproduces_counts`)
    cannot see this (a group rate misses each stratum's count by the strata's spread), so
    the same question is asked of the groups, each way refusing:

    * **exact**: ``k mu_g = count_g`` for every group within :data:`EXACT_RTOL`, with
      ``k = 1`` or the one factor ``k = total / sum mu_g`` (the total is published): the
      table's own rates, or a multiple of them (1.05 x, 1.5 x), printed to 7 or more
      digits. A real prior meets this by chance with probability about ``2 EXACT_RTOL
      count_g`` a group (after the first, with the factor): nil.
    * **smoothed**: the same with ``k mu_g = count_g + a`` for the pseudo-counts ``a`` of
      :data:`PSEUDO_COUNTS` (``(count_g + 0.5) / population_g``), from two groups on.
    * **affine**: with three or more groups, ``count_g = alpha mu_g + beta`` exactly (the
      same tolerance), ``alpha > 0``: smoothed own rates times any factor.
    * **printed**: own rates printed to a few digits (``0.001234``) give back the totals
      only to the precision of their printing. The agreement test below with that window:
      the number of groups whose ``k mu_g`` lies within half a unit of its rate's last
      printed digit (times ``mu_g``, at most 1 event) of the count, against its exact null
      probabilities, refused when the Chernoff bound is below :data:`ALPHA`. A round
      public rate (``0.001``) has a wide window, so its groups meet it by chance often and
      the bound stays far above ``ALPHA``: it is never refused for being round.
    * **agreement / deviance**: the two tests of this module on the groups, with ``k = 1``
      and with the fitted ``k``: group totals within 1 event of ``k mu_g`` in far more
      groups than chance allows, or a deviance far below its null. Under the steward's
      claim each group's count is binomial (``population_g``, the group's rate) exactly,
      since the rate is the group's; the fitted factor takes one degree of freedom, which
      the tests' margins (1e-9, 6 standard deviations) absorb.

    A few groups whose own rates were rounded or smoothed can escape the last line (it is
    statistical), and so can a prior that is the counts only in part; docs/privacy.md
    (Part 1) says so. Groups without events and without expected events carry nothing and
    are left out. Time and memory are linear in the strata (a few ``bincount`` passes).
    """
    counts = np.asarray(counts)
    population = np.asarray(population, dtype=float)
    rate = np.asarray(rate, dtype=float)
    codes = np.asarray(codes, dtype=np.int64)
    size = int(codes.max(initial=-1)) + 1
    if size == 0:
        return None
    count_g = np.bincount(codes, weights=counts.astype(float), minlength=size)
    mu_g = np.bincount(codes, weights=population * rate, minlength=size)
    population_g = np.bincount(codes, weights=population, minlength=size)
    first = np.full(size, -1, dtype=np.int64)
    first[codes[::-1]] = np.arange(codes.size - 1, -1, -1)  # each group's first stratum
    keep = (first >= 0) & ((count_g > 0) | (mu_g > 0))
    count_g, mu_g, population_g = count_g[keep], mu_g[keep], population_g[keep]
    named = first[keep]
    if count_g.size < 2 or count_g.sum() == 0:
        return None  # one group: its total is the table's, public
    factor = count_g.sum() / mu_g.sum()
    group_rate = rate[named]
    for offset in (0.0, *PSEUDO_COUNTS):
        fitted_k = (count_g.sum() + offset * count_g.size) / mu_g.sum()
        for k, fitted in ((1.0, False), (fitted_k, True)):
            if _within(k * mu_g - offset - count_g, count_g):
                kind = "exact" if offset == 0 else "smoothed"
                return GroupFinding(kind, named, fitted, offset)
    if count_g.size >= 3:
        centred = mu_g - mu_g.mean()
        spread = float(centred @ centred)
        if spread > 0:
            alpha = float(centred @ (count_g - count_g.mean())) / spread
            beta = count_g.mean() - alpha * mu_g.mean()
            if alpha > 0 and _within(alpha * mu_g + beta - count_g, count_g):
                return GroupFinding("affine", named, True)
    printed = _printed_precision(group_rate) if count_g.size <= PRINTED_GROUPS else None
    for k, fitted in ((1.0, False), (factor, True)):
        scaled = np.minimum(k * group_rate, 1.0) if k > 1 else k * group_rate
        if printed is not None:
            window = np.maximum(np.minimum(printed * k * mu_g, 1.0), 1e-9)
            if _agrees_within(count_g, population_g, scaled, window, poisson):
                return GroupFinding("printed", named, fitted)
        test = _fit(count_g.astype(np.int64), population_g, scaled, poisson)
        if test is not None:
            return GroupFinding(test, named, fitted)
    return None


def group_refusal(where: str, columns: list[str], finding: GroupFinding, named: str) -> str:
    """The one-line refusal of a grouped prior that carries the groups' totals
    (:func:`group_fit`); ``named`` describes the groups (their key values, never a count)."""
    fix = (
        f"use rates made without these counts (national or earlier rates), or "
        f"--sanitised-prior-by {' '.join(columns)} (noisy group totals, budget "
        f"--prior-epsilon); if the rates are public after all, say so with {OVERRIDE}"
    )
    how = {
        "exact": "exactly" + (" up to one factor" if finding.factor else ""),
        "smoothed": f"plus a pseudo-count of {finding.offset:g}, exactly"
        + (" up to one factor" if finding.factor else ""),
        "affine": "exactly up to one factor and one offset (smoothed rates)",
        "printed": "to within the precision its rate is printed to, in far more groups "
        "than chance allows" + (" (after one factor)" if finding.factor else ""),
        "agreement": "within 1 event in far more groups than chance allows"
        + (" (after one factor)" if finding.factor else ""),
        "deviance": "far closer than noise around a prior allows"
        + (" (after one factor)" if finding.factor else ""),
    }[finding.kind]
    return (
        f"{where}: the prior rates look like the table's own rates by {columns}: population "
        f"x prior rate summed over each of the {finding.groups.size} groups ({named}) gives "
        f"back the group's count {how}. Published, they would publish every group's total, "
        f"and moving one event between two groups would change two of them; {fix}"
    )


def refusal(where: str, why: str) -> str:
    """The one-line refusal: the file, why (:func:`prior_reproduces_counts`), what to do."""
    return (
        f"{where}: the prior rates look computed from these counts: {why}. Published as "
        "they are, they would publish the counts; use rates made without them (national or "
        "earlier rates, a coarser group's published rate) or --sanitised-prior-by, or, if "
        f"the rates are public, say so with {OVERRIDE}"
    )


#: The message for a prior rate of 0 (a floor, a coarser group or a sanitised prior; never
#: smoothing with the counts, which this module refuses).
ZERO_RATE = (
    "expected prior rates > 0 (the gamma prior's mean; a zero rate leaves no room for any "
    "event). Do not smooth it with the counts (such as (count + 0.5) / population: that "
    "publishes them); give these strata a public floor rate, the rate of a coarser public "
    "group, or use --sanitised-prior-by COLUMN... (noisy group totals, budget --prior-epsilon)"
)
