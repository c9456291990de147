"""The count-fit check in linear time and bounded memory (issue #36): its null moments and
agreement probabilities, computed once per distinct (population, rate) pair and in blocks,
are those of a straightforward stratum-by-stratum enumeration (kept here as the reference,
the check as it was), and its decisions are the reference's on random tables."""

from __future__ import annotations

import math
import os

import numpy as np
import pytest
from scipy import stats

from dpcounts.release import prior_check
from dpcounts.release.prior_check import (
    ALPHA,
    ENUMERATED_MEAN,
    Z_REFUSE,
    agreement_tail,
    deviance,
    prior_reproduces_counts,
)

# --- the reference: every stratum on its own, through scipy.stats ------------------------


def reference_null(population, rate):
    mu = population * rate
    if np.all(population == np.round(population)) and np.all(rate < 1):
        return mu, stats.binom(np.round(population).astype(np.int64), rate), population
    return mu, stats.poisson(mu), None


def reference_moments(mu, n):
    """Each stratum's null mean and variance of its deviance."""
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
    return mean, var


def reference_agreement(mu, dist):
    return dist.cdf(np.floor(mu + 1.0)) - dist.cdf(np.ceil(mu - 1.0) - 1.0)


def reference_decision(counts, population, rate) -> str | None:
    counts = np.asarray(counts, dtype=float)
    mu, dist, n = reference_null(np.asarray(population, float), np.asarray(rate, float))
    agree = int(np.sum(np.abs(mu - counts) <= 1.0))
    if agreement_tail(agree, reference_agreement(mu, dist)) < ALPHA:
        return "agreement"
    mean, var = (float(v.sum()) for v in reference_moments(mu, n))
    if var > 0 and deviance(counts, mu, n).sum() < mean - Z_REFUSE * math.sqrt(var):
        return "deviance"
    return None


def decision(counts, population, rate) -> str | None:
    why = prior_reproduces_counts(counts, population, rate)
    return None if why is None else ("agreement" if "within 1" in why else "deviance")


# --- random tables -----------------------------------------------------------------------


def random_table(rng: np.random.Generator, kind: str, size: int):
    """(counts, population, rate) of one kind: binomial (whole populations, rates < 1),
    fractional populations, rates >= 1 somewhere, or few distinct pairs (repeated)."""
    if kind == "repeated":
        pairs = rng.integers(1, 6)
        n = rng.integers(1, 5000, pairs).astype(float)[rng.integers(0, pairs, size)]
        rate = rng.uniform(1e-4, 0.02, pairs)[rng.integers(0, pairs, size)]
    else:
        n = np.round(np.exp(rng.uniform(0.0, math.log(1e5), size)))
        if kind == "fractional":
            n = n * rng.uniform(0.5, 1.5, size)
        rate = np.exp(rng.uniform(math.log(1e-5), math.log(0.5), size))
        if rng.random() < 0.5:
            rate = np.minimum(rate, 40.0 / n)  # mostly enumerated (mu <= 40)
        if kind == "rates >= 1":
            rate[rng.random(size) < 0.2] = rng.uniform(1.0, 3.0)
            rate[0] = 1.0
    mu = n * rate
    if kind in ("binomial", "repeated"):
        counts = rng.binomial(n.astype(np.int64), rate).astype(float)
    else:
        counts = rng.poisson(mu).astype(float)
    return counts, n, rate


KINDS = ("binomial", "fractional", "rates >= 1", "repeated")


@pytest.mark.parametrize("kind", KINDS)
def test_the_moments_and_agreement_are_the_stratum_by_stratum_enumerations(kind, monkeypatch):
    rng = np.random.default_rng(sum(map(ord, kind)))
    for block in (prior_check.BLOCK, 200):  # and many small blocks
        monkeypatch.setattr(prior_check, "BLOCK", block)
        for _ in range(8):
            _, population, rate = random_table(rng, kind, int(rng.integers(1, 600)))
            mu, dist, n = reference_null(population, rate)
            mean_ref, var_ref = reference_moments(mu, n)
            mu_new, n_new = prior_check._null(population, rate)
            assert np.array_equal(mu_new, mu) and (n_new is None) == (n is None)
            assert (n is None) == (kind in ("fractional", "rates >= 1"))
            mean, var, agree, inverse = prior_check._distinct_nulls(mu_new, n_new, rate)
            assert mean.size <= mu.size and inverse.shape == mu.shape
            np.testing.assert_allclose(mean[inverse], mean_ref, rtol=1e-7, atol=1e-300)
            np.testing.assert_allclose(var[inverse], var_ref, rtol=1e-7, atol=1e-300)
            np.testing.assert_allclose(
                agree[inverse], reference_agreement(mu, dist), rtol=1e-9, atol=1e-15
            )
            assert math.isclose(mean[inverse].sum(), mean_ref.sum(), rel_tol=1e-9)
            assert math.isclose(var[inverse].sum(), var_ref.sum(), rel_tol=1e-9)


def test_a_pair_is_enumerated_once():
    rng = np.random.default_rng(3)
    population = rng.choice([120.0, 4500.0, 80_000.0], 50_000)
    rate = rng.choice([1e-4, 3e-3], population.size)
    mu, n = prior_check._null(population, rate)
    mean, _, _, inverse = prior_check._distinct_nulls(mu, n, rate)
    assert mean.size == 6 and inverse.max() == 5


@pytest.mark.parametrize("kind", KINDS)
def test_the_decisions_are_the_references_on_random_tables(kind, monkeypatch):
    """Draws around the prior, priors shrunk part way towards the counts' own rates (some
    refused, some not) and the counts' own rates: the same decision as the reference."""
    monkeypatch.setattr(prior_check, "CHUNK", 97)  # the per-stratum sums in chunks too
    rng = np.random.default_rng(100 + sum(map(ord, kind)))
    seen = set()
    for _ in range(40):
        counts, population, rate = random_table(rng, kind, int(rng.integers(20, 800)))
        own = (counts + 0.5) / population
        for weight in (0.0, rng.uniform(0.0, 1.0), 1.0):
            prior = np.exp((1 - weight) * np.log(rate) + weight * np.log(own))
            expected = reference_decision(counts, population, prior)
            assert decision(counts, population, prior) == expected
            seen.add(expected)
    assert seen == {None, "agreement", "deviance"}  # the tables reach every outcome


@pytest.mark.parametrize("kind", ["poisson", "binomial"])
def test_the_null_cdf_is_scipy_stats_to_the_bit(kind):
    """null_cdf (the agreement of strata with large expected counts) equals scipy.stats'
    cdf exactly: random parameters, counts below, inside and past the support."""
    rng = np.random.default_rng(36)
    size = 20_000
    mu = np.exp(rng.uniform(np.log(30.0), np.log(1e6), size))
    k = np.concatenate([np.floor(mu + rng.normal(0, 3, size) * np.sqrt(mu)), [-1.0, -2.5]])
    mu = np.concatenate([mu, [50.0, 50.0]])
    if kind == "poisson":
        want = stats.poisson.cdf(k, mu)
        got = prior_check.null_cdf(k, mu, None, None)
    else:
        n = np.round(mu / rng.uniform(1e-4, 0.9, mu.size)).astype(np.int64)
        n[:50] = np.floor(k[:50]).clip(0).astype(np.int64)  # k at the support's end
        n[50:60] = np.floor(k[50:60]).clip(1).astype(np.int64) - 1  # k past it
        p = np.minimum(mu / np.maximum(n, 1), 1.0)
        want = stats.binom.cdf(k, n, p)
        got = prior_check.null_cdf(k, mu, n, p)
        assert (want == 1.0).any()  # past the support's end
    assert np.array_equal(got, want)
    assert (want == 0.0).any() and ((want > 0) & (want < 1)).any()


@pytest.mark.process
def test_a_release_imports_no_scipy_stats(tmp_path):
    """A release on the default path (a national table's prior-rate column: truncation
    bounds with quantiles near a root, the count-fit check with large expected counts, the
    utility report's rank correlation) never imports scipy.stats (about a second), and
    does take those three paths."""
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[1]
    sys.path.insert(0, str(repo / "benchmarks"))
    from national_table import KEYS, national_table

    national_table(32).to_parquet(tmp_path / "t.parquet")
    code = f"""
import sys
from dpcounts.mechanisms import truncation
from dpcounts.release import prior_check
from dpcounts.studies.stage import measures
calls = dict.fromkeys(["_root_quantile", "null_cdf", "average_ranks"], 0)
def counted(module, name):
    original = getattr(module, name)
    def wrapper(*args, **kwargs):
        calls[name] += 1
        return original(*args, **kwargs)
    setattr(module, name, wrapper)
counted(truncation, "_root_quantile")
counted(prior_check, "null_cdf")
counted(measures, "average_ranks")
from dpcounts.cli import main
code = main(["synthesize", "--input", {str(tmp_path / "t.parquet")!r}, "--keys", *{KEYS!r},
             "--strata", "input", "--prior-rate-column", "prior_rate", "--epsilon", "1",
             "--mechanism", "truncated",
             "--prior-source", "national rates by age, published 1999 (test)",
             "--dataset", "t", "--out", {str(tmp_path / "out")!r}, "--private-dir",
             {str(tmp_path / "private")!r}, "--quiet"])
print(code, min(calls.values()), "scipy.stats" in sys.modules)
"""
    env = {**os.environ, "DPCOUNTS_LEDGER": str(tmp_path / "ledger")}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    code, least_calls, imported = done.stdout.split()[-3:]
    assert (code, imported) == ("0", "False") and int(least_calls) > 0, done.stdout
