"""The exact discrete Laplace sampler: exact scale, pmf, goodness of fit, OpenDP agreement."""

from __future__ import annotations

import hashlib
import math
from fractions import Fraction

import numpy as np
import pytest
from conftest import discrete_laplace_log_cdf
from scipy import stats

from dpcounts.privacy import discrete_laplace as dl
from dpcounts.privacy.discrete_laplace import (
    bernoulli_exp,
    discrete_laplace_log_pmf,
    discrete_laplace_pmf,
    geometric_noise,
    sample_discrete_laplace,
    scale_for,
)

ALPHA = 1e-3  # significance of each goodness-of-fit test (fixed seeds: deterministic)
# OpenDP draws from the operating system's randomness (no seed): a smaller significance keeps
# the chance of a spurious failure near 1e-4 per run of the whole file.
ALPHA_UNSEEDED = 1e-5


def bin_probabilities(edges, scale) -> np.ndarray:
    """P(edges[i] <= X < edges[i+1]) for integer edges (first/last bins open-ended)."""
    cdf = np.exp(discrete_laplace_log_cdf(np.asarray(edges[1:-1]) - 1, scale))
    cdf = np.concatenate([[0.0], cdf, [1.0]])
    return np.diff(cdf)


def quantile_edges(scale, n_bins: int = 40) -> np.ndarray:
    """Integer bin edges near equal-probability quantiles (any edges are valid: the bin
    probabilities come from the exact cdf). Inverts the closed-form cdf: for
    p <= q / (1 + q) the p-quantile is -floor(-log(p (1 + q)) / c), above it
    ceil(-log((1 - p)(1 + q)) / c) - 1, with c = 1 / scale and q = e^-c."""
    c = float(1 / Fraction(scale))
    q = math.exp(-c)
    p = np.linspace(0, 1, n_bins + 1)[1:-1]
    with np.errstate(divide="ignore"):
        lower = -np.floor(-np.log(p * (1 + q)) / c)
        upper = np.ceil(-np.log((1 - p) * (1 + q)) / c) - 1
    quantile = np.where(p <= q / (1 + q), lower, upper)
    return np.unique(np.concatenate([[-np.inf], quantile + 1, [np.inf]]))


def integer_edges(scale, n: int) -> np.ndarray:
    """One bin per integer k while n P(X = k) >= 5 and the tail beyond still has >= 5
    expected draws, then one open bin per tail (for small scales, where quantile bins
    would lump every tail value together)."""
    k = np.arange(0, 400)
    pmf = np.exp(discrete_laplace_log_pmf(k, scale))
    tail = 1 - np.exp(discrete_laplace_log_cdf(k, scale))  # P(X > k)
    single = (n * pmf >= 5) & (n * tail >= 5)
    last = int(np.argmin(single)) - 1 if not single.all() else k[-1]
    assert last >= 0
    inner = np.arange(-last, last + 2)  # bins {-last}, ..., {last}, open tails
    return np.concatenate([[-np.inf], inner, [np.inf]])


def edges_for(scale, n: int) -> np.ndarray:
    """Bins of the goodness-of-fit tests: single integers for small scales, else quantiles."""
    return integer_edges(scale, n) if float(scale) <= 20 else quantile_edges(scale, 40)


def chi_square_pvalue(draws, scale) -> float:
    edges = edges_for(scale, draws.size)
    probs = bin_probabilities(edges, scale)
    observed = np.histogram(draws, bins=edges)[0]
    assert (probs * draws.size >= 5).all(), "bins too thin"
    return stats.chisquare(observed, probs * draws.size).pvalue


SCALES = {
    "1": Fraction(1),
    "1/3": Fraction(1, 3),
    "7/2": Fraction(7, 2),
    "2/0.3": scale_for(0.3, 2),
    "2/0.01": scale_for(0.01, 2),  # numerator of 61 bits
    "2/0.00099": scale_for(0.00099, 2),  # numerator of 63 bits, just below the int64 bound
    "2**63/3**25": Fraction(2**63, 3**25),  # numerator exactly 2**63: the largest int64 range
    "2/1e-5": scale_for(1e-5, 2),  # numerator of 71 bits: multi-word uniforms, Python ints
    "10^4": Fraction(10**4),
    "10^6 + 1/3": Fraction(3 * 10**6 + 1, 3),
}


# --- the exact scale -------------------------------------------------------------------------
def test_scale_for_converts_epsilon_exactly():
    scale = scale_for(0.3, 2)
    assert isinstance(scale, Fraction)
    assert Fraction(0.3) == Fraction(5404319552844595, 18014398509481984)  # the binary value
    assert scale == Fraction(2) / Fraction(0.3)
    assert scale * Fraction(0.3) == 2  # exactly Delta / eps, no rounding
    assert scale != Fraction(20, 3)  # the float 0.3 is not 3/10
    assert float(scale) == pytest.approx(2 / 0.3, rel=1e-15)
    assert scale_for(0.5, 2) == 4 and scale_for(1.0) == 1
    assert scale_for(1e-5, 2).numerator > 2**63  # tiny epsilons need big integers
    for epsilon in (0.0, -1.0, math.nan, math.inf):
        with pytest.raises((ValueError, TypeError)):
            scale_for(epsilon, 2)
    with pytest.raises(ValueError):
        scale_for(1.0, 0)


def test_pmf_sums_to_one_and_matches_closed_form():
    for scale in (Fraction(1, 3), Fraction(1), scale_for(0.3, 2), Fraction(50)):
        k = np.arange(-4000, 4001)
        pmf = discrete_laplace_pmf(k, scale)
        assert pmf.sum() == pytest.approx(1.0, rel=1e-12)
        q = math.exp(-1 / float(scale))
        np.testing.assert_allclose(pmf[4000:4010], (1 - q) / (1 + q) * q ** np.arange(10))
        np.testing.assert_array_equal(pmf, pmf[::-1])
        # the cdf used by the goodness-of-fit tests agrees with the pmf
        np.testing.assert_allclose(
            np.exp(discrete_laplace_log_cdf(k[:-1], scale)), np.cumsum(pmf)[:-1], atol=1e-12
        )
    # the geometric mechanism's pmf at scale Delta / eps: q^|k| (1 - q) / (1 + q),
    # q = e^(-eps / Delta)
    k = np.arange(-30, 31)
    log_q = -0.7 / 2
    closed = np.abs(k) * log_q + np.log1p(-np.exp(log_q)) - np.log1p(np.exp(log_q))
    np.testing.assert_allclose(discrete_laplace_log_pmf(k, scale_for(0.7, 2)), closed, rtol=1e-13)
    # large 1 / scale: no overflow, P(0) -> 1
    assert discrete_laplace_log_pmf(0, Fraction(1, 1000)) == pytest.approx(0.0, abs=1e-300)


# --- building blocks ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    "gamma",
    [
        Fraction(0),
        Fraction(1, 3),
        Fraction(1),
        Fraction(5, 2),
        Fraction(0.3),
        Fraction(2**70 + 1, 2**71),
    ],
)
def test_bernoulli_exp_has_probability_exp_minus_gamma(gamma):
    rng = np.random.default_rng(7)
    n = 200_000
    draws = bernoulli_exp(gamma, n, rng)
    assert draws.dtype == bool and draws.shape == (n,)
    if gamma == 0:
        assert draws.all()
        return
    p = math.exp(-float(gamma))
    assert stats.binomtest(int(draws.sum()), n, p).pvalue > ALPHA


def test_uniform_below_is_uniform_beyond_int64():
    rng = np.random.default_rng(3)
    n = 3 * 2**64 + 5
    draws = dl._uniform_below(n, 50_000, rng)
    assert draws.dtype == object
    assert all(0 <= d < n for d in draws)
    tenths = np.array([10 * d // n for d in draws], dtype=np.int64)
    observed = np.bincount(tenths, minlength=10)
    assert stats.chisquare(observed).pvalue > ALPHA
    low_bits = np.array([d % 8 for d in draws], dtype=np.int64)
    assert stats.chisquare(np.bincount(low_bits, minlength=8)).pvalue > ALPHA


def test_geometric_building_block():
    rng = np.random.default_rng(5)
    v = dl._geometric_exp_minus_one(100_000, rng)
    k = np.arange(8)
    probs = np.exp(-k) * -math.expm1(-1.0)
    observed = np.append(np.bincount(v, minlength=8)[:8], (v >= 8).sum())
    expected = np.append(probs, 1 - probs.sum()) * v.size
    assert stats.chisquare(observed, expected).pvalue > ALPHA


# --- the sampler ---------------------------------------------------------------------------------
@pytest.mark.parametrize("name", list(SCALES))
def test_goodness_of_fit(name):
    scale = SCALES[name]
    rng = np.random.default_rng(20240 + list(SCALES).index(name))
    draws = sample_discrete_laplace(scale, 100_000, rng)
    assert draws.dtype == np.int64 and draws.shape == (100_000,)
    assert chi_square_pvalue(draws, scale) > ALPHA


@pytest.mark.parametrize("scale", [Fraction(1, 3), scale_for(0.3, 2), Fraction(10**4)])
def test_symmetry(scale):
    rng = np.random.default_rng(99)
    draws = sample_discrete_laplace(scale, 100_000, rng)
    nonzero = draws[draws != 0]
    assert stats.binomtest(int((nonzero > 0).sum()), nonzero.size, 0.5).pvalue > ALPHA
    # |X| given X != 0 has the same distribution on both sides (two-sample chi-square)
    edges = np.unique(np.quantile(np.abs(nonzero), np.linspace(0, 1, 11))).astype(float)
    edges[-1] += 1
    table = np.array(
        [
            np.histogram(nonzero[nonzero > 0], edges)[0],
            np.histogram(-nonzero[nonzero < 0], edges)[0],
        ]
    )
    table = table[:, table.min(axis=0) > 0]
    if table.shape[1] > 1:
        assert stats.chi2_contingency(table).pvalue > ALPHA


def test_shapes_reproducibility_and_errors():
    scale = scale_for(0.3, 2)
    first = sample_discrete_laplace(scale, (3, 4), np.random.default_rng(1))
    again = sample_discrete_laplace(scale, (3, 4), np.random.default_rng(1))
    assert first.shape == (3, 4) and first.dtype == np.int64
    np.testing.assert_array_equal(first, again)
    assert sample_discrete_laplace(scale, 0, np.random.default_rng(1)).shape == (0,)
    assert sample_discrete_laplace(scale, None, np.random.default_rng(1)).shape == ()
    for bad in (0, -1, Fraction(-1, 2), math.nan):
        with pytest.raises((ValueError, TypeError)):
            sample_discrete_laplace(bad, 10, np.random.default_rng(1))
    with pytest.raises(OverflowError):  # draws beyond int64 are refused, not wrapped
        sample_discrete_laplace(Fraction(10**30), 10, np.random.default_rng(1))


def test_combined_floor_division_is_exact():
    # Y = floor((U + t V) / s) is computed in int64 without forming U + t V; compare with
    # Python integers at the extremes (U = t - 1, large V, t close to 2**63).
    rng = np.random.default_rng(4)
    for scale in (scale_for(0.01, 2), scale_for(0.00099, 2), Fraction(2**62 + 3, 2**52 + 1)):
        t, s = scale.numerator, scale.denominator
        u = np.array([0, 1, t - 1, *rng.integers(0, t, 20)], dtype=np.int64)
        v = np.array([0, 7, 40, *rng.integers(0, 40, 20)], dtype=np.int64)
        expected = [(int(a) + t * int(b)) // s for a, b in zip(u, v, strict=True)]
        fast = dl._floor_of_ratio(u, v, t, s)
        assert fast.dtype == np.int64 and fast.tolist() == expected
        slow = dl._floor_of_ratio(u.astype(object), v, t, s)  # the Python-integer path
        assert [int(x) for x in slow] == expected


def test_geometric_noise_is_the_exact_sampler():
    draws = geometric_noise(0.3, 1000, np.random.default_rng(8))
    same = sample_discrete_laplace(scale_for(0.3, 2), 1000, np.random.default_rng(8))
    np.testing.assert_array_equal(draws, same)
    assert draws.dtype == np.int64
    other = geometric_noise(0.3, 1000, np.random.default_rng(8), sensitivity=1)
    np.testing.assert_array_equal(
        other, sample_discrete_laplace(scale_for(0.3, 1), 1000, np.random.default_rng(8))
    )


def test_chacha_generator():
    randomgen = pytest.importorskip("randomgen")
    rng = np.random.Generator(randomgen.ChaCha(seed=12345, rounds=20))
    for scale in (scale_for(0.3, 2), Fraction(1, 3), scale_for(1e-5, 2)):
        assert chi_square_pvalue(sample_discrete_laplace(scale, 100_000, rng), scale) > ALPHA


@pytest.mark.slow
# --- agreement with OpenDP's sampler -----------------------------------------------------------
@pytest.mark.parametrize("float_scale", [2 / 0.3, 1.0, 0.5, 40.0])
def test_two_sample_against_opendp(float_scale):
    dp = pytest.importorskip("opendp.prelude")
    dp.enable_features("contrib")
    n = 100_000
    space = dp.vector_domain(dp.atom_domain(T="i64")), dp.l1_distance(T="i64")
    measurement = dp.m.make_laplace(*space, scale=float_scale)
    theirs = np.asarray(measurement([0] * n), dtype=np.int64)
    # OpenDP converts the float scale to an exact rational (dashu's RBig::try_from), as
    # Fraction does: both samplers target the same distribution.
    ours = sample_discrete_laplace(Fraction(float_scale), n, np.random.default_rng(31))
    edges = edges_for(Fraction(float_scale), n)
    table = np.array([np.histogram(ours, edges)[0], np.histogram(theirs, edges)[0]])
    assert table.shape[1] >= 5  # bins with >= 5 expected draws per sample under the null
    assert stats.chi2_contingency(table).pvalue > ALPHA_UNSEEDED
    # and OpenDP's draws agree with the exact pmf on their own
    assert chi_square_pvalue(theirs, Fraction(float_scale)) > ALPHA_UNSEEDED


#: SHA-256 (first 16 hex digits) of the int64 / bool draws and the next uniform of the
#: stream, as drawn by the sampler of 4d9fd50 (before issue #28's speed-ups): a faster
#: sampler must draw the same numbers and leave the generator where it left it.
PINNED_DRAWS = {
    (0.01, 5000): ("673e5b03b767c6e4", 777130580629923314),
    (1.0, 5000): ("2074458f6cee35a9", 2410181595281260687),
    (46.42, 5000): ("e7e2dcff542de953", 958982893889865433),
    (0.0006, 300): ("1a52f640b3837b98", 827228088830011494),  # numerator > 2**63
    (0.1, 49): ("07070aadff8f5784", 4105785617769170212),
}


@pytest.mark.parametrize(("epsilon", "size"), sorted(PINNED_DRAWS))
def test_draws_and_stream_are_pinned(epsilon, size):
    rng = np.random.default_rng(20261126)
    draws = geometric_noise(epsilon, size, rng)
    digest = hashlib.sha256(draws.astype("<i8").tobytes()).hexdigest()[:16]
    assert (digest, int(rng.integers(0, 2**62))) == PINNED_DRAWS[(epsilon, size)]


def test_bernoulli_exp_draws_and_stream_are_pinned():
    rng = np.random.default_rng(7)
    draws = bernoulli_exp(Fraction(7, 3), 4000, rng)
    digest = hashlib.sha256(draws.tobytes()).hexdigest()[:16]
    assert (digest, int(rng.integers(0, 2**62))) == ("357540d5aee9b24d", 2080070468244064141)
