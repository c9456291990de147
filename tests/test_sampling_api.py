"""synthesize / posterior_rates: input checks, properties of every draw, rate moments."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import random_bounds
from hypothesis import given, settings
from hypothesis import strategies as st

from dpcounts import posterior_rates, synthesize
from dpcounts.calibration import Calibration
from dpcounts.sampling.study_mode import StudySampler


@st.composite
def instances(draw):
    """A random calibration of any mechanism and data y consistent with its total."""
    n_cells = draw(st.integers(1, 7))
    total = draw(st.integers(0, 40))
    mechanism = draw(st.sampled_from(["md", "pg", "truncated"]))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    y = rng.multinomial(total, np.full(n_cells, 1.0 / n_cells))
    a = rng.uniform(0.05, 30.0, n_cells)
    kwargs = {}
    if mechanism != "md":
        kwargs = {
            "b": rng.uniform(0.01, 100.0, n_cells),
            "population": rng.uniform(1.0, 1e5, n_cells),
        }
    if mechanism == "truncated":
        lower, upper = random_bounds(rng, n_cells, total)
        kwargs.update(lower=lower, upper=upper)
    cal = Calibration(mechanism=mechanism, method="paper", epsilon=1.0, total=total, a=a, **kwargs)
    return cal, y, seed


@settings(max_examples=60, deadline=None)
@given(instances())
def test_every_synthetic_vector_is_valid(instance):
    cal, y, seed = instance
    z = synthesize(y, cal, 25, np.random.default_rng(seed))
    lower, upper = cal.bounds()
    assert z.shape == (25, cal.n_cells) and z.dtype == np.int64
    assert np.all(z >= 0)
    assert np.all((z >= lower) & (z <= upper))
    assert np.all(z.sum(axis=1) == cal.total)


def small_pg(**changes) -> Calibration:
    fields = dict(
        mechanism="pg",
        method="paper",
        epsilon=1.0,
        total=10,
        a=[1.0, 2.0, 3.0],
        b=[1.0, 1.0, 2.0],
        population=[100.0, 200.0, 50.0],
    )
    fields.update(changes)
    return Calibration(**fields)


@pytest.mark.parametrize(
    ("y", "match"),
    [
        ([5, 5], "vector of 3 counts"),
        ([5, 5, 1], "total is 10"),
        ([5, 6, -1], "non-negative"),
        ([5.5, 4.5, 0], "integers"),
        ([[5, 5, 0]], "vector of 3"),
    ],
)
def test_bad_counts_are_rejected(y, match):
    with pytest.raises(ValueError, match=match):
        synthesize(y, small_pg(), 1, np.random.default_rng(0))


def test_bad_size_and_rng_are_rejected():
    with pytest.raises(ValueError, match="size"):
        synthesize([5, 5, 0], small_pg(), -1, np.random.default_rng(0))
    with pytest.raises(TypeError, match="Generator"):
        synthesize([5, 5, 0], small_pg(), 1, 0)


def test_infeasible_bounds_are_rejected():
    bounded = dict(mechanism="truncated", lower=[0, 0, 0], upper=[2, 3, 4])
    with pytest.raises(ValueError, match="infeasible bounds"):
        StudySampler([5, 5, 0], small_pg(**bounded))
    with pytest.raises(ValueError, match="infeasible bounds"):
        synthesize(
            [5, 5, 0],
            small_pg(mechanism="truncated", lower=[4, 4, 3], upper=[9, 9, 9]),
            1,
            np.random.default_rng(0),
        )


def test_posterior_rates_gamma_moments():
    cal = small_pg(mechanism="truncated", lower=[0, 2, 0], upper=[6, 9, 3])
    y = np.array([1, 1, 8])  # clamped to (1, 2, 3) for the posterior
    draws = posterior_rates(y, cal, 40_000, np.random.default_rng(4))
    assert draws.shape == (40_000, 3) and np.all(draws > 0)
    shape = np.array([1, 2, 3]) + cal.a
    rate = cal.population + cal.b
    mean, sd = shape / rate, np.sqrt(shape) / rate
    np.testing.assert_array_less(np.abs(draws.mean(axis=0) - mean), 5 * sd / np.sqrt(40_000))
    np.testing.assert_allclose(draws.std(axis=0), sd, rtol=0.03)


def test_posterior_rates_md_uses_dirichlet_shares():
    population = np.array([1000.0, 500.0, 2000.0])
    cal = Calibration(
        mechanism="md",
        method="paper",
        epsilon=1.0,
        total=10,
        a=[0.5, 1.0, 2.5],
        population=population,
    )
    y = np.array([2, 8, 0])
    draws = posterior_rates(y, cal, 40_000, np.random.default_rng(5))
    share = (y + cal.a) / (y + cal.a).sum()
    expected = share * 10 / population
    np.testing.assert_allclose(draws.mean(axis=0), expected, rtol=0.02)
    np.testing.assert_allclose((draws * population).sum(axis=1), 10.0)


def test_posterior_rates_md_needs_population():
    cal = Calibration(mechanism="md", method="paper", epsilon=1.0, total=3, a=[1.0, 1.0])
    with pytest.raises(ValueError, match="population"):
        posterior_rates([1, 2], cal, 2, np.random.default_rng(0))


def test_sampler_is_reproducible_for_a_seed():
    sampler = StudySampler([3, 5, 2], small_pg())
    first = sampler.draw(50, np.random.default_rng(11))
    again = sampler.draw(50, np.random.default_rng(11))
    assert np.array_equal(first, again)


@pytest.mark.parametrize("mechanism", ["md", "pg", "truncated"])
def test_zero_total_and_single_cell_edge_cases(mechanism):
    bounds = {"lower": [0, 0], "upper": [3, 3]} if mechanism == "truncated" else {}
    extra = {} if mechanism == "md" else {"b": [1.0, 2.0], "population": [10.0, 20.0]}
    zero = Calibration(
        mechanism=mechanism, method="paper", epsilon=1.0, total=0, a=[1.0, 2.0], **extra, **bounds
    )
    sampler = StudySampler([0, 0], zero)
    assert np.array_equal(sampler.draw(3, np.random.default_rng(0)), np.zeros((3, 2)))
    assert np.array_equal(synthesize([0, 0], zero, 3, np.random.default_rng(0)), np.zeros((3, 2)))
    one = {k: v[:1] for k, v in (extra | bounds).items()}
    single = Calibration(mechanism=mechanism, method="paper", epsilon=1.0, total=2, a=[1.0], **one)
    assert np.array_equal(
        StudySampler([2], single).draw(4, np.random.default_rng(0)), np.full((4, 1), 2)
    )


def test_total_at_an_end_of_the_feasible_range_gives_the_only_vector():
    bounds = {"lower": [1, 0, 2], "upper": [4, 5, 6]}
    low = small_pg(mechanism="truncated", total=3, **bounds)
    draws = synthesize([0, 3, 0], low, 5, np.random.default_rng(0))
    assert np.all(draws == [1, 0, 2])
    high = small_pg(mechanism="truncated", total=15, **bounds)
    draws = synthesize([5, 5, 5], high, 5, np.random.default_rng(0))
    assert np.all(draws == [4, 5, 6])


@pytest.mark.parametrize("mechanism", ["md", "pg"])
def test_posterior_rates_per_dataset_matches_the_single_dataset_law(mechanism):
    from dpcounts.sampling.synthesize import posterior_rates_per_dataset

    n = np.array([100.0, 300.0, 600.0])
    if mechanism == "md":
        cal = Calibration("md", "paper", 1.0, 12, a=[2.0, 2.0, 2.0], population=n)
    else:
        a = np.array([1.0, 2.0, 3.0])
        cal = Calibration(
            "pg", "paper", 1.0, 12, a=a, b=a / 0.01, population=n, prior_rate=[0.01] * 3
        )
    y = np.array([2, 4, 6])
    many = posterior_rates_per_dataset(np.tile(y, (40_000, 1)), cal, np.random.default_rng(0))
    single = posterior_rates(y, cal, 40_000, np.random.default_rng(1))
    assert many.shape == (40_000, 3)
    se = np.sqrt(many.var(axis=0) / 40_000 + single.var(axis=0) / 40_000)
    assert np.all(np.abs(many.mean(axis=0) - single.mean(axis=0)) < 5 * se)
    np.testing.assert_allclose(many.std(axis=0), single.std(axis=0), rtol=0.05)


def test_posterior_rates_of_counts_draws_what_posterior_rates_draws():
    """The unchecked entry point draws the same
    numbers from the same stream as posterior_rates, for pg and md."""
    from dpcounts import calibrate
    from dpcounts.sampling.synthesize import posterior_rates_of_counts

    y = np.array([3, 0, 7, 2, 5])
    pop = np.array([100.0, 250.0, 80.0, 400.0, 120.0])
    for mechanism in ("pg", "md"):
        cal = calibrate(mechanism, 1.0, int(y.sum()), pop)
        first = posterior_rates(y, cal, 3, np.random.default_rng(8))
        again = posterior_rates_of_counts(y.astype(np.int64), cal, 3, np.random.default_rng(8))
        np.testing.assert_array_equal(first, again)


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.uint64, np.float64])
def test_count_rows_are_checked_alike_whatever_their_type(dtype):
    """check_count_rows (posterior_rates_per_dataset's check) takes int64 rows as they are
    and converts others; every type is refused alike for a negative count, a fraction and
    a row of another total."""
    from dpcounts.sampling.bounds import check_count_rows

    cal = Calibration("md", "paper", 1.0, 12, a=[2.0, 2.0, 2.0])
    rows = np.array([[2, 4, 6], [12, 0, 0]], dtype=dtype)
    checked = check_count_rows(rows, cal)
    assert checked.dtype == np.int64 and np.array_equal(checked, rows)
    assert (checked is rows) == (dtype == np.int64)
    wrong_total = rows.copy()
    wrong_total[1, 0] = 11
    with pytest.raises(ValueError, match="y sums to 11, but the calibration's total is 12"):
        check_count_rows(wrong_total, cal)
    if np.dtype(dtype).kind != "u":
        negative = rows.astype(np.int64)
        negative[0] = [-1, 7, 6]
        with pytest.raises(ValueError, match="non-negative integers"):
            check_count_rows(negative.astype(dtype), cal)
    if np.dtype(dtype).kind == "f":
        with pytest.raises(ValueError, match="non-negative integers"):
            check_count_rows(rows + [[0.5, -0.5, 0.0], [0.0, 0.0, 0.0]], cal)
        with pytest.raises(ValueError, match="finite numbers"):
            check_count_rows(rows * np.array([[np.nan, 1, 1], [1, 1, 1]]), cal)


@pytest.mark.parametrize(
    "bad, message",
    [
        ([2, -1, 3], "non-negative integers, got minimum -1"),
        ([2.0, -1.0, 3.0], "non-negative integers, got minimum -1"),
        ([2.5, 0.5, 1.0], "non-negative integers, got non-whole float64"),
        ([2.0, np.nan, 1.0], "finite numbers"),
        (["2", "1", "1"], "finite numbers"),
    ],
)
def test_every_check_of_counts_refuses_alike(bad, message):
    """Issue #51, item 4: the checks of a vector of counts (a sampler's, check_count_rows,
    Study 1's datasets, the geometric baseline's, the suppression rule's) are one check,
    bounds.count_values: the same refusals, each naming what it checks, and whole
    floating-point counts accepted as the integers they are."""
    from dpcounts.baselines.geometric import geometric_release, geometric_release_each
    from dpcounts.baselines.suppression import check_counts as suppression_counts
    from dpcounts.sampling.bounds import check_count_rows, check_counts
    from dpcounts.studies.study1 import _checked_rows

    cal = Calibration("md", "paper", 1.0, 4, a=[2.0, 2.0, 2.0])
    population = np.ones(3)
    rng = np.random.default_rng(0)
    checks = {
        "y": [
            lambda v: check_counts(v, cal),
            lambda v: check_count_rows([v], cal),
            lambda v: _checked_rows(np.array([v]), population),
            lambda v: geometric_release(v, 1.0, 1, rng),
        ],
        "datasets": [lambda v: geometric_release_each(np.array([v]), 1.0, rng)],
        "counts": [suppression_counts],
    }
    for name, calls in checks.items():
        for call in calls:
            with pytest.raises(ValueError, match=f"^{name} must hold {message}"):
                call(np.array(bad))
    whole = np.array([2.0, 1.0, 1.0])
    rows = _checked_rows(whole[None, :], population)
    for counts in (check_counts(whole, cal), suppression_counts(whole), rows[0]):
        assert counts.dtype == np.int64 and np.array_equal(counts, [2, 1, 1])
    assert geometric_release(whole, 1.0, 3, rng).sum(axis=1).tolist() == [4, 4, 4]
