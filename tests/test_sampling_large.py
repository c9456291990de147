"""The tree sampler on a county-sized instance: validity, marginals, tail-error bound."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from dpcounts.calibration import Calibration
from dpcounts.sampling.study_mode import StudySampler

N_CELLS, TOTAL = 3_000, 11_000


@pytest.fixture(scope="module")
def inputs():
    rng = np.random.default_rng(2021)
    population = np.exp(rng.normal(9.5, 1.2, N_CELLS))
    prior_rate = TOTAL / population.sum() * np.exp(rng.normal(0.0, 0.3, N_CELLS))
    mean = population * prior_rate
    y = rng.multinomial(TOTAL, mean / mean.sum())
    tail = 1.0 / N_CELLS
    lower = stats.poisson.ppf(tail / 2, mean).astype(np.int64)
    upper = stats.poisson.ppf(1 - tail / 2, mean).astype(np.int64)
    return y, population, prior_rate, lower, upper


@pytest.fixture(scope="module")
def truncated_sampler(inputs):
    y, population, prior_rate, lower, upper = inputs
    a = np.maximum((upper - lower) / np.expm1(0.5) - 2 * lower, 1 / 3)
    cal = Calibration(
        mechanism="truncated",
        method="certified",
        epsilon=1.0,
        total=TOTAL,
        a=a,
        b=a / prior_rate,
        population=population,
        prior_rate=prior_rate,
        lower=lower,
        upper=upper,
    )
    return StudySampler(y, cal)


def test_rows_are_within_bounds_and_sum_to_the_total(truncated_sampler):
    cal = truncated_sampler.calibration
    draws = truncated_sampler.draw(60, np.random.default_rng(1))
    assert draws.shape == (60, N_CELLS) and draws.dtype == np.int64
    assert np.all(draws.sum(axis=1) == TOTAL)
    assert np.all((draws >= cal.lower) & (draws <= cal.upper))


def test_sample_means_agree_with_exact_tree_marginals(truncated_sampler):
    n = 400
    draws = truncated_sampler.draw(n, np.random.default_rng(2))
    marginals = truncated_sampler.marginal_pmfs()
    mean = np.array([np.dot(off + np.arange(p.size), p) for off, p in marginals])
    var = np.array([np.dot((off + np.arange(p.size)) ** 2, p) for off, p in marginals]) - mean**2
    assert mean.sum() == pytest.approx(TOTAL, rel=1e-10)
    z = (draws.mean(axis=0) - mean) / np.sqrt(var / n + 1e-12)
    assert np.max(np.abs(z)) < 5.5  # 3,000 cells: 5.5 sd is a 1-in-10,000 family-wise event
    # and jointly: the standardised errors look standard normal
    assert abs(np.mean(z**2) - 1.0) < 0.15


def test_tail_truncation_error_is_negligible(truncated_sampler):
    assert truncated_sampler.tv_bound < 1e-8


def test_md_tree_marginal_means_equal_dirichlet_multinomial_means(inputs):
    # Independent check of the up/down pass: the DM marginal mean is y.(y_k + a_k)/sum(y + a).
    y = inputs[0]
    alpha = np.random.default_rng(3).uniform(0.2, 5.0, N_CELLS)
    cal = Calibration(mechanism="md", method="paper", epsilon=1.0, total=TOTAL, a=alpha)
    sampler = StudySampler(y, cal)
    expected = TOTAL * (y + alpha) / (y + alpha).sum()
    np.testing.assert_allclose(sampler.marginal_means(), expected, rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("sizes", [(129, 129), (130, 700), (1000, 257), (4097, 5003)])
def test_tree_convolution_is_fftconvolve_bit_for_bit(sizes):
    """The tree's FFT convolution (scipy's fftconvolve by its own steps, without its
    per-call checks) gives fftconvolve's very bits: the draws of a seed do not move."""
    from scipy.signal import fftconvolve

    from dpcounts.sampling.convolution import fft_convolve

    rng = np.random.default_rng(sum(sizes))
    a, b = (rng.dirichlet(np.ones(size)) for size in sizes)
    np.testing.assert_array_equal(fft_convolve(a, b), fftconvolve(a, b))


def random_pairs(rng, sizes):
    """(lefts, rights): a random pmf of each size of ``sizes``' pairs."""
    lefts = [rng.dirichlet(np.ones(left)) for left, _ in sizes]
    rights = [rng.dirichlet(np.ones(right)) for _, right in sizes]
    return lefts, rights


def test_batched_tree_convolutions_are_the_pairwise_ones_bit_for_bit():
    """A level's long pairs convolved together (one transform per FFT length, rows of a
    2-D array) give each pair's own convolution's very bits, lengths shared or not."""
    from dpcounts.sampling.convolution import fft_convolve, fft_convolve_many

    rng = np.random.default_rng(36)
    sizes = [(129, 129), (130, 700), (700, 130), (1000, 257), (4097, 5003), (129, 130)]
    sizes += [tuple(rng.integers(129, 3000, 2).tolist()) for _ in range(40)]
    lefts, rights = random_pairs(rng, sizes)
    batched = fft_convolve_many(lefts, rights)
    assert len(batched) == len(sizes)
    for a, b, conv in zip(lefts, rights, batched, strict=True):
        np.testing.assert_array_equal(conv, fft_convolve(a, b))


def test_tree_convolution_rows_are_the_clipped_padded_pairs_bit_for_bit():
    """A level's long pairs as the rows of one padded array (pocketfft's entry points
    called directly, each length's lefts and rights in one forward transform) hold each
    pair's own scipy.fft convolution, negative round-off clipped, zeros beyond its end."""
    from dpcounts.sampling.convolution import fft_convolve, fft_convolve_rows

    rng = np.random.default_rng(4)
    sizes = [(129, 129), (129, 130), (130, 129), (700, 130), (4097, 5003), (1, 300)]
    sizes += [tuple(rng.integers(100, 2500, 2).tolist()) for _ in range(30)]
    lefts, rights = random_pairs(rng, sizes)
    rows = fft_convolve_rows(lefts, rights)
    assert rows.shape == (len(sizes), max(a + b - 1 for a, b in sizes))
    for a, b, row in zip(lefts, rights, rows, strict=True):
        conv = np.clip(fft_convolve(a, b), 0.0, None)
        np.testing.assert_array_equal(row[: conv.size], conv)
        assert not np.any(row[conv.size :])


def _numpy_trim_rows(prob, tail):
    """The tail trim as numpy steps (the build's before it was compiled)."""
    width = prob.shape[1]
    rows = np.arange(prob.shape[0])
    left = np.cumsum(prob, axis=1)
    right = np.cumsum(prob[:, ::-1], axis=1)[:, ::-1]
    first = np.argmax(left > tail, axis=1)
    last = width - 1 - np.argmax((right > tail)[:, ::-1], axis=1)
    cut = np.where(first > 0, left[rows, np.maximum(first - 1, 0)], 0.0)
    cut += np.where(last + 1 < width, right[rows, np.minimum(last + 1, width - 1)], 0.0)
    return first, last, cut


@pytest.mark.parametrize("tail", [1e-16, 1e-3, 0.0])
def test_compiled_trim_is_the_numpy_trim_bit_for_bit(tail):
    """The compiled tail trim (running sums stopped at the tail) gives the numpy cumsums'
    columns and cut masses, bit for bit: rows cut on both sides, on none, zero-padded."""
    from dpcounts.sampling.tree_steps import trim_rows

    rng = np.random.default_rng(16)
    for width in (1, 2, 7, 64, 300):
        prob = rng.dirichlet(np.full(width, 0.05), size=40) if width > 1 else np.ones((3, 1))
        prob[::3, width // 2 + 1 :] = 0.0  # padding
        prob[1::5] = np.exp(-0.5 * ((np.arange(width) - width / 2) / 3.0) ** 2)  # far tails
        prob /= prob.sum(axis=1, keepdims=True)
        for got, want in zip(trim_rows(prob, tail), _numpy_trim_rows(prob, tail), strict=True):
            np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("width", [1, 2, 4, 16, 128])
def test_compiled_direct_convolution_is_the_numpy_loop_bit_for_bit(width):
    """The compiled short-pair convolution adds each product in the numpy loop's order:
    the same bits (no fused multiply-add), zero padding included."""
    from dpcounts.sampling.tree_steps import direct_convolve

    rng = np.random.default_rng(width)
    left, right = (rng.dirichlet(np.ones(width), size=25) for _ in range(2))
    left[::4, width // 2 + 1 :] = 0.0
    want = np.zeros((25, 2 * width - 1))
    for j in range(width):
        want[:, j : j + width] += left * right[:, j : j + 1]
    got = np.zeros_like(want)
    direct_convolve(left, right, got)
    np.testing.assert_array_equal(got, want)


def test_remembered_window_moments_are_fresh_ones_bit_for_bit():
    """The tilt solver's moments remember their last tilt, and the leaves take its pmfs:
    whatever was asked before, each answer and each pmf is what a fresh evaluation gives,
    a zero's sign included (a negative zero tilt is not taken for a positive one)."""
    from dpcounts.sampling.tilt import tilted_probabilities, window_moments, window_weights

    rng = np.random.default_rng(11)
    shape = rng.uniform(0.5, 40.0, 60)
    log_p = np.log(rng.uniform(0.1, 0.9, 60))
    start = rng.integers(0, 5, 60)
    weights = window_weights(shape, log_p, start, start + rng.integers(0, 300, 60))
    moments = window_moments(*weights)
    for log_c in (0.0, 0.3, 0.3, -0.0, 0.0, -1.25, -1.25):
        assert moments(log_c) == window_moments(*weights)(log_c)
        for got, want in zip(
            moments.probabilities(log_c), tilted_probabilities(*weights, log_c), strict=True
        ):
            np.testing.assert_array_equal(got, want)
            assert np.array_equal(np.signbit(got), np.signbit(want))


def test_log_factorial_table_is_gammaln_bit_for_bit(monkeypatch):
    """The leaves' log v! read from the process's table are scipy's gammaln(v + 1.0), the
    same bits, on a table's edges and past the largest table kept (computed directly)."""
    from scipy.special import gammaln

    from dpcounts.sampling import tilt

    v = np.array([[0, 1, 2, 1023, 1024], [5000, 70_000, 3, 0, 1 << 17]], dtype=np.int64)
    np.testing.assert_array_equal(tilt._log_factorial(v), gammaln(v + 1.0))
    monkeypatch.setattr(tilt, "_LOG_FACTORIALS", 4096)
    np.testing.assert_array_equal(tilt._log_factorial(v), gammaln(v + 1.0))
    with pytest.raises(ValueError):
        tilt._log_factorials(1024)[0] = 1.0  # shared: read-only


def test_tree_rows_to_list_is_np_split():
    """The trimmed rows as slices are np.split's pieces, value for value."""
    from dpcounts.sampling.study_mode import _rows_to_list

    rng = np.random.default_rng(7)
    prob = rng.random((50, 300))
    first = rng.integers(0, 150, 50)
    last = first + rng.integers(0, 150, 50)
    columns = np.arange(300)[None, :]
    keep = (columns >= first[:, None]) & (columns <= last[:, None])
    kept = np.where(keep, prob, 0.0)
    kept /= kept.sum(axis=1, keepdims=True)
    expected = np.split(kept[keep], np.cumsum(last - first + 1)[:-1])
    rows = _rows_to_list(prob, first, last)
    assert len(rows) == len(expected)
    for row, want in zip(rows, expected, strict=True):
        np.testing.assert_array_equal(row, want)
