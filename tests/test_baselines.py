"""Baselines: geometric output perturbation, MODIPS, sanitised state prior."""

import numpy as np
import pytest
from scipy import stats

from dpcounts.baselines.geometric import (
    _post_process,
    geometric_release,
    geometric_release_each,
    largest_remainder_round,
    project_to_simplex,
)
from dpcounts.baselines.modips import modips_release
from dpcounts.privacy.discrete_laplace import (
    SENSITIVITY,
    discrete_laplace_log_pmf,
    geometric_noise,
    scale_for,
)
from dpcounts.privacy.sanitised_prior import sanitised_prior_calibration


def geometric_log_pmf(k, epsilon):
    """log P(e = k) of the geometric mechanism's noise: discrete Laplace, scale Delta / eps."""
    return discrete_laplace_log_pmf(k, scale_for(epsilon, SENSITIVITY))


def test_geometric_pmf_sums_to_one():
    k = np.arange(-400, 401)
    assert np.exp(geometric_log_pmf(k, 0.7)).sum() == pytest.approx(1.0, rel=1e-12)


@pytest.mark.parametrize("epsilon", [0.3, 1.0, 3.0])
def test_neighbouring_noise_ratio_within_epsilon(epsilon):
    # Noisy output v of y and of a neighbour x (one event moved): the exact pmf ratio over
    # a window of outputs never exceeds e^eps, and reaches it.
    y, x = np.array([3, 1, 4]), np.array([2, 2, 4])
    grid = np.stack(np.meshgrid(*[np.arange(-6, 12)] * 3, indexing="ij"), -1).reshape(-1, 3)
    log_y = geometric_log_pmf(grid - y, epsilon).sum(axis=1)
    log_x = geometric_log_pmf(grid - x, epsilon).sum(axis=1)
    gap = np.abs(log_y - log_x)
    assert gap.max() <= epsilon + 1e-12
    assert gap.max() == pytest.approx(epsilon)


def test_geometric_sampler_draws_its_pmf():
    rng = np.random.default_rng(11)
    draws = geometric_noise(1.0, 20_000, rng)
    k = np.arange(-8, 9)
    observed = np.array([(draws == v).sum() for v in k])
    probs = np.exp(geometric_log_pmf(k, 1.0))
    observed = np.append(observed, draws.size - observed.sum())
    expected = np.append(probs, 1 - probs.sum()) * draws.size
    assert stats.chisquare(observed, expected).pvalue > 0.001


def test_projection_and_rounding():
    v = project_to_simplex([3.2, -1.0, 0.4, 2.9], 5)
    assert v.min() >= 0 and v.sum() == pytest.approx(5)
    # Already on the simplex: unchanged.
    np.testing.assert_allclose(project_to_simplex([1.0, 2.0, 2.0], 5), [1, 2, 2])
    np.testing.assert_array_equal(largest_remainder_round([1.4, 2.6, 1.0], 5), [1, 3, 1])


def test_geometric_release_rows_are_valid():
    rng = np.random.default_rng(5)
    y = np.array([10, 0, 3, 7, 1])
    out = geometric_release(y, 0.5, 50, rng)
    assert out.shape == (50, 5)
    assert np.all(out >= 0) and np.all(out.sum(axis=1) == y.sum())


def test_integer_rows_are_projected_and_rounded_as_the_reference_does():
    """The linear-time path for integer rows (issue #28) gives, bit for bit, the sorted
    reference largest_remainder_round(project_to_simplex(row, total), total): noisy counts
    of every spread, many ties, small and large totals."""
    rng = np.random.default_rng(11)
    for trial in range(400):
        n = int(rng.choice([2, 3, 7, 50, 400]))
        total = int(rng.choice([1, 2, 5, n, 3 * n, 5000]))
        y = rng.multinomial(total, rng.dirichlet(np.full(n, rng.uniform(0.05, 5))), size=3)
        scale = float(10 ** rng.uniform(-1, 3))
        noisy = y + np.rint(rng.laplace(0, scale, y.shape)).astype(np.int64)
        if trial % 5 == 0:
            noisy[:, : n // 2] = noisy[:, :1]  # many equal values (and remainders)
        expected = np.stack(
            [largest_remainder_round(project_to_simplex(row, t), t)
             for row, t in zip(noisy, y.sum(axis=1).tolist(), strict=True)]
        )  # fmt: skip
        got = _post_process(noisy, y.sum(axis=1))
        assert got.dtype == np.int64
        np.testing.assert_array_equal(got, expected)


def test_a_row_the_compiled_rounding_cannot_do_gets_the_references_error():
    """Rows after a row of total 0 are still done; that row raises what the reference
    raises (project_to_simplex finds no threshold)."""
    noisy = np.array([[1, 2, 0], [0, 0, 0], [5, -1, 2]])
    with pytest.raises(IndexError):
        project_to_simplex(noisy[1], 0)
    with pytest.raises(IndexError):
        _post_process(noisy, np.array([3, 0, 6]))
    good = _post_process(noisy[[0, 2]], np.array([3, 6]))
    expected = [
        largest_remainder_round(project_to_simplex(noisy[r], t), t) for r, t in ((0, 3), (2, 6))
    ]
    np.testing.assert_array_equal(good, expected)
    np.testing.assert_array_equal(good[1], [5, 0, 1])  # ties at remainder 1/2: lower index


def test_geometric_release_each_gives_one_valid_row_per_dataset():
    datasets = np.array([[10, 0, 3, 7, 1], [0, 0, 0, 0, 2], [5, 5, 5, 5, 5]])
    out = geometric_release_each(datasets, 0.5, np.random.default_rng(5))
    assert out.shape == datasets.shape and out.dtype == np.int64
    assert np.all(out >= 0)
    np.testing.assert_array_equal(out.sum(axis=1), datasets.sum(axis=1))
    # the same noise draw as geometric_release: identical rows for identical datasets
    y = datasets[0]
    np.testing.assert_array_equal(
        geometric_release_each(np.tile(y, (4, 1)), 0.5, np.random.default_rng(9)),
        geometric_release(y, 0.5, 4, np.random.default_rng(9)),
    )
    with pytest.raises(ValueError, match="2-D"):
        geometric_release_each(y, 0.5, np.random.default_rng(0))


def test_modips_release_keeps_total_and_depends_on_rng_only():
    y = np.array([5, 0, 12, 3])
    pop = np.array([100.0, 50, 300, 80])
    first = modips_release(y, 1.0, 1.0, 0.05, pop, 20, np.random.default_rng(1))
    again = modips_release(y, 1.0, 1.0, 0.05, pop, 20, np.random.default_rng(1))
    np.testing.assert_array_equal(first, again)
    assert np.all(first.sum(axis=1) == y.sum()) and np.all(first >= 0)


def test_sanitised_prior_splits_the_budget():
    rng = np.random.default_rng(2)
    y = np.array([4, 6, 1, 9, 0, 3])
    state = np.array(["PA", "PA", "NJ", "NJ", "NY", "NY"])
    pop = np.array([100.0, 200, 50, 400, 80, 90])
    rates, cal = sanitised_prior_calibration(y, state, pop, 2.0, 0.5, rng)
    assert cal.epsilon == pytest.approx(1.5)
    assert cal.total == y.sum()
    np.testing.assert_array_equal(cal.prior_rate, rates)
    assert rates[0] == rates[1] and np.all(rates > 0)
    with pytest.raises(ValueError, match="epsilon_prior"):
        sanitised_prior_calibration(y, state, pop, 1.0, 1.0, rng)


def test_noisy_state_rates_of_many_datasets_add_discrete_laplace_noise_to_each_row():
    """Rows of datasets at once: each row's state totals (its own bincount) plus noise
    drawn as the discrete Laplace of scale 2 / eps_prior, independent across rows and
    states (a chi-square test of the recovered noise against the exact pmf)."""
    from scipy import stats

    from dpcounts.privacy.discrete_laplace import discrete_laplace_pmf, scale_for
    from dpcounts.privacy.sanitised_prior import StateGroups

    rng = np.random.default_rng(21)
    state = np.array(["NJ", "PA", "NJ", "NY", "PA", "PA"])
    pop = np.array([100.0, 200, 50, 400, 80, 90])
    groups = StateGroups.of(state, pop)
    ys = rng.integers(5_000, 9_000, size=(20_000, 6))
    rates = groups.noisy_rates(ys, 0.8, rng)
    assert rates.shape == ys.shape
    one = groups.noisy_rates(ys[3], 0.8, np.random.default_rng(1))
    assert one.shape == (6,) and np.all(one[[1, 4, 5]] == one[1])
    totals = np.stack([np.bincount(groups.codes, weights=y, minlength=3) for y in ys])
    first_cell = [list(groups.codes).index(s) for s in range(3)]
    noise = rates[:, first_cell] * groups.population - totals  # no floor: totals >= 5,000
    recovered = np.round(noise).astype(np.int64)
    np.testing.assert_allclose(noise, recovered, atol=1e-6)
    k = np.arange(-12, 13)
    expected = discrete_laplace_pmf(k, scale_for(0.8, 2)) * recovered.size
    observed = np.array([np.count_nonzero(recovered == j) for j in k])
    tails = recovered.size - observed.sum()
    expected_tails = recovered.size - expected.sum()
    chi2 = np.sum((observed - expected) ** 2 / expected) + (tails - expected_tails) ** 2 / max(
        expected_tails, 1e-9
    )
    assert stats.chi2.sf(chi2, df=k.size) > 1e-4
    # independent across rows and states: neighbouring draws uncorrelated
    flat = recovered.ravel().astype(float)
    assert abs(np.corrcoef(flat[:-1], flat[1:])[0, 1]) < 5 / np.sqrt(flat.size)


def test_the_sanitised_arm_draws_each_rows_own_calibration():
    """Study 1's sanitised arm (all rows at once) gives each dataset the rates drawn from
    calibrate('pg', eps - eps_prior, its total, populations, its noisy prior) and one
    gamma draw: the same numbers as those steps taken one calibration at a time."""
    from dpcounts import calibrate
    from dpcounts.privacy.sanitised_prior import StateGroups
    from dpcounts.studies.study1 import _sanitised_rates, study1_arm

    rng = np.random.default_rng(4)
    state = np.repeat(np.arange(5), 8)
    pop = rng.uniform(1e3, 1e5, state.size)
    ys = rng.poisson(pop * 2e-3, size=(12, state.size)).astype(np.int64)
    groups = StateGroups.of(state, pop)
    arm = study1_arm("pg_state_sanitised")
    for epsilon in (0.05, 2.0):
        got = _sanitised_rates(
            ys, groups, pop, arm, epsilon, 0.1 * epsilon, np.random.default_rng(9)
        )
        again = np.random.default_rng(9)
        prior = groups.noisy_rates(ys, 0.1 * epsilon, again)
        cals = [
            calibrate("pg", epsilon - 0.1 * epsilon, int(y.sum()), pop, p, method="paper")
            for y, p in zip(ys, prior, strict=True)
        ]
        shapes = np.stack([y + cal.a for y, cal in zip(ys, cals, strict=True)])
        rates = np.stack([pop + cal.b for cal in cals])
        np.testing.assert_array_equal(got, again.gamma(shapes, 1.0 / rates))
    with pytest.raises(ValueError, match="epsilon_prior"):
        _sanitised_rates(ys, groups, pop, arm, 1.0, 1.0, rng)
