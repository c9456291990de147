"""A prior that cannot be the data: refuse prior rates that reproduce the counts.

A prior column (``--prior FILE`` or the input's prior-rate column) is the steward's
declaration that the rates are public, made without these counts. The release publishes
them as they are, so a "prior" computed from the counts, such as ``(count + 0.5) /
population`` or a shrinkage estimate, publishes the counts: every count comes back from the
hyperparameters while the manifest states epsilon. No check can prove a prior public, but
one can tell a prior that fits the counts far better than chance allows.

The null hypothesis is the steward's own claim: the rates were fixed without these counts,
so each count is a draw around its expected count ``mu = population x prior_rate``
(binomial when the populations are whole and the rates below 1, Poisson otherwise). A real
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

Both tails are about 1e-9 under the null, so a public prior is refused by chance about
once in a billion tables. A table of a few strata cannot be told apart this way (six
counts may match their prior by chance), and a prior that is the data only in part
(shrinkage towards a group rate) may pass: the check catches the common accident, it
does not prove a prior public (docs/privacy.md, Part 5).

The check reads the counts, so whether a release goes ahead depends on them: a refusal
before anything is spent, drawn or written, like the count-dependent refusal of
docs/privacy.md, Part 5, and said so there. The steward who knows the prior is public
(it was published before these counts existed) passes ``--prior-is-public-i-am-sure``.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special, stats

#: Largest upper-tail probability of the agreement count that still passes.
ALPHA = 1e-9
#: How many null standard deviations below its null mean the deviance may lie.
Z_REFUSE = 6.0
#: Strata whose expected count is at most this have the deviance's moments enumerated.
ENUMERATED_MEAN = 30.0
#: The option that overrides the check (the steward's explicit word).
OVERRIDE = "--prior-is-public-i-am-sure"


def _null(population: np.ndarray, rate: np.ndarray):
    """The null distribution of the counts: binomial, or Poisson when it cannot be."""
    mu = population * rate
    whole = np.all(population == np.round(population)) and np.all(rate < 1)
    if whole:
        return mu, stats.binom(np.round(population).astype(np.int64), rate), population
    return mu, stats.poisson(mu), None


def deviance(counts: np.ndarray, mu: np.ndarray, n: np.ndarray | None) -> np.ndarray:
    """Each stratum's deviance of ``counts`` against the expected ``mu`` (binomial with
    ``n`` trials, or Poisson when ``n`` is None)."""
    counts = np.asarray(counts, dtype=float)
    d = special.xlogy(counts, counts) - special.xlogy(counts, mu)
    if n is None:
        d = d - (counts - mu)
    else:
        rest, rest_mu = n - counts, n - mu
        d = d + special.xlogy(rest, rest) - special.xlogy(rest, rest_mu)
    return 2.0 * np.maximum(d, 0.0)


def _deviance_moments(mu: np.ndarray, dist, n: np.ndarray | None) -> tuple[float, float]:
    """The null mean and variance of the summed deviance."""
    small = mu <= ENUMERATED_MEAN
    mean = np.where(small, 0.0, 1.0 + 1.0 / (6.0 * np.maximum(mu, 1.0)))
    var = np.where(small, 0.0, 2.0)
    if small.any():
        top = int(math.ceil(ENUMERATED_MEAN + 12 * math.sqrt(ENUMERATED_MEAN) + 20))
        k = np.arange(top + 1, dtype=float)[None, :]
        index = np.flatnonzero(small)
        mu_s = mu[index][:, None]
        if n is None:
            pmf = stats.poisson.pmf(k, mu_s)
            d = deviance(k, mu_s, None)
        else:
            n_s = n[index][:, None]
            pmf = stats.binom.pmf(k, np.round(n_s).astype(np.int64), mu_s / n_s)
            d = np.where(k <= n_s, deviance(np.minimum(k, n_s), mu_s, n_s), 0.0)
        m1 = (pmf * d).sum(axis=1)
        mean[index] = m1
        var[index] = np.maximum((pmf * d * d).sum(axis=1) - m1 * m1, 0.0)
    return float(mean.sum()), float(var.sum())


def agreement_tail(agree: int, p: np.ndarray) -> float:
    """An upper bound on P(K >= agree) for K a sum of independent Bernoulli(p) (Chernoff)."""
    m = float(np.sum(p))
    if agree <= m:
        return 1.0
    return math.exp(min(0.0, -m + agree * (1.0 + math.log(m / agree)) if m > 0 else -math.inf))


def prior_reproduces_counts(counts, population, rate) -> str | None:
    """Why the prior rates cannot be a prior made without these counts, or None.

    ``counts``, ``population`` and ``rate`` are per stratum (rates finite and > 0). The
    answer names the test, never a count or a statistic of them.
    """
    counts = np.asarray(counts, dtype=float)
    population = np.asarray(population, dtype=float)
    rate = np.asarray(rate, dtype=float)
    mu, dist, n = _null(population, rate)
    p = dist.cdf(np.floor(mu + 1.0)) - dist.cdf(np.ceil(mu - 1.0) - 1.0)
    agree = int(np.sum(np.abs(mu - counts) <= 1.0))
    if agreement_tail(agree, p) < ALPHA:
        return (
            "population x prior rate lies within 1 of the count in far more strata than "
            f"chance allows (p < {ALPHA:g} if the counts were drawn around the prior)"
        )
    mean, var = _deviance_moments(mu, dist, n)
    if var > 0 and deviance(counts, mu, n).sum() < mean - Z_REFUSE * math.sqrt(var):
        return (
            "the counts lie far closer to population x prior rate than noise around a prior "
            f"allows (their deviance is more than {Z_REFUSE:g} standard deviations below "
            "its expected value)"
        )
    return None


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
