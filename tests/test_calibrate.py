"""Calibrations: closed forms against the papers, input validation, properties."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpcounts import calibrate
from dpcounts.privacy.certified import certified_epsilon, certified_shapes, kappa
from dpcounts.privacy.exact_bivariate import bivariate_epsilon
from dpcounts.privacy.paper import pg_nu


def test_md_reproduces_the_ce_race_slides():
    # Hu's tutorial: counts 816, 109, 7, 39, 6, 17, eps = 5 -> alpha_min printed as 6.742953.
    counts = [816, 109, 7, 39, 6, 17]
    cal = calibrate("md", 5, sum(counts), np.ones(len(counts)))
    assert cal.b is None and cal.population.tolist() == [1.0] * 6
    np.testing.assert_allclose(cal.a, 6.742953, atol=5e-7)


def test_md_matches_seed_000_example():
    # Quick (2021) below eq 5: z. = 10,000, eps = 7 -> alpha_i >= 9.12.
    cal = calibrate("md", 7, 10_000, np.ones(3000))
    assert np.floor(cal.a[0] * 100) / 100 == 9.12  # the paper truncates 9.127


def test_pg_paper_reproduces_toy_untruncated():
    # Quick (2022), Section 2.3: y. = 100, E[y] = (15, 85), eps = 1 -> a_1 > 116, a_2 > 58.
    cal = calibrate("pg", 1, 100, [15, 85])
    assert 116 <= cal.a[0] < 117
    assert 58 <= cal.a[1] < 59


def test_pg_paper_is_a_fixed_point_of_eq_15():
    rng = np.random.default_rng(3)
    population = rng.uniform(10, 1000, size=7)
    prior = rng.uniform(0.01, 0.1, size=7)
    cal = calibrate("pg", 2.0, 40, population, prior)
    nu = pg_nu(cal.a, 40, population, prior)
    np.testing.assert_allclose(cal.a, 40 / (np.exp(2.0) / nu - 1), rtol=1e-9)
    np.testing.assert_allclose(cal.b, cal.a / prior)


def test_pg_paper_equals_md_when_rates_and_populations_are_equal():
    cal = calibrate("pg", 1.5, 30, np.full(4, 100.0))
    np.testing.assert_allclose(cal.a, 30 / np.expm1(1.5), rtol=1e-9)


def test_pg_paper_solves_small_epsilon_with_very_unequal_cells():
    # nu_i < 2 keeps eq (15) solvable; the shapes stay finite and exceed the MD value.
    cal = calibrate("pg", 0.05, 100, [1, 1000])
    assert np.all(np.isfinite(cal.a)) and np.all(cal.a >= 100 / np.expm1(0.05) * (1 - 1e-12))


def test_truncated_paper_refuses_a_dominant_cell():
    with pytest.raises(ValueError, match="dominant"):
        calibrate("truncated", 1, 100, [15, 85], tail=1e-4)


def test_truncated_bounds_and_kerman_floor():
    population = np.array([2.0, 50, 300, 600, 400])
    cal = calibrate("truncated", 3.0, 200, population, tail=1e-3)
    expected = population * 200 / population.sum()
    assert np.all(cal.lower <= np.floor(expected)) and np.all(cal.upper >= np.ceil(expected))
    assert np.all(cal.a[cal.lower == 0] >= 1 / 3)
    assert np.all(cal.a >= 1e-3)


def test_infeasible_bounds_raise():
    with pytest.raises(ValueError, match="infeasible"):
        calibrate("truncated", 1, 1000, [10, 10, 10], prior_rate=[0.01, 0.01, 0.01])


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"epsilon": 0}, "epsilon"),
        ({"epsilon": float("nan")}, "epsilon"),
        ({"total": 0}, "total"),
        ({"total": 2.5}, "total"),
        ({"population": [1, 0, 3]}, "population"),
        ({"population": [1, np.inf, 3]}, "population"),
        ({"prior_rate": [0.1, 0.0, 0.1]}, "prior_rate"),
        ({"prior_rate": [0.1, 0.1]}, "prior_rate"),
    ],
)
def test_bad_inputs_name_the_argument(kwargs, match):
    args = {"epsilon": 1.0, "total": 10, "population": [1, 2, 3], "prior_rate": None}
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        calibrate("pg", args["epsilon"], args["total"], args["population"], args["prior_rate"])


def test_truncation_settings_are_checked():
    with pytest.raises(ValueError, match="inflation"):
        calibrate("truncated", 1, 10, [1, 2, 3], inflation=0.5)
    with pytest.raises(ValueError, match="tail"):
        calibrate("truncated", 1, 10, [1, 2, 3], tail=1.5)
    with pytest.raises(ValueError, match="truncated"):
        calibrate("pg", 1, 10, [1, 2, 3], tail=0.01)


def test_inflation_widens_the_bounds():
    narrow = calibrate("truncated", 1, 60, [10, 20, 30, 40], method="certified")
    wide = calibrate("truncated", 1, 60, [10, 20, 30, 40], method="certified", inflation=1.5)
    assert np.all(wide.lower <= narrow.lower) and np.all(wide.upper >= narrow.upper)
    assert np.any(wide.upper > narrow.upper)


def test_bad_mechanism_and_method():
    with pytest.raises(ValueError, match="mechanism"):
        calibrate("laplace", 1, 10, [1, 2])
    with pytest.raises(ValueError, match="method"):
        calibrate("pg", 1, 10, [1, 2], method="optimal")


def test_certified_kappa_meets_the_budget():
    population = np.array([5.0, 40, 80, 200])
    prior = np.array([0.1, 0.02, 0.05, 0.01])
    for mechanism in ("pg", "truncated"):
        cal = calibrate(mechanism, 1.0, 12, population, prior, method="certified")
        lower, upper = cal.bounds()
        assert certified_epsilon(cal.a, 12, lower, upper) <= 1.0 + 1e-12


def test_certified_gives_the_leftover_budget_to_the_only_binding_cell():
    # Toy example: cell 2's floor leaves kappa_2 < eps/2, so cell 1 may use eps - kappa_2.
    cal = calibrate("truncated", 1.0, 100, [15, 85], tail=1e-4, method="certified")
    k = kappa(cal.a, 100, cal.lower, cal.upper)
    assert k[1] < 0.5 and k[0] > 0.5
    assert k.sum() == pytest.approx(1.0, rel=1e-9) and k.sum() <= 1.0
    symmetric = certified_shapes(1.0, 100, cal.lower, cal.upper, budgets=[0.5, 0.5])
    assert cal.a[0] < symmetric[0]


def test_certified_budgets_must_fit_epsilon():
    with pytest.raises(ValueError, match="budgets"):
        certified_shapes(1.0, 10, [0, 0, 0], [10, 10, 10], budgets=[0.6, 0.5, 0.1])


def test_exact_bivariate_loss_is_monotone_in_a():
    population, prior = np.array([15.0, 85]), np.array([1.0, 1.0])
    lower, upper = np.array([3, 52]), np.array([32, 100])
    losses = [
        bivariate_epsilon(np.array([a1, 0.5]), 100, population, prior, lower, upper)[0]
        for a1 in np.geomspace(0.01, 1000, 40)
    ]
    assert np.all(np.diff(losses) < 0)


def test_exact_bivariate_is_tight_for_two_cells():
    cal = calibrate("truncated", 1.0, 100, [15, 85], tail=1e-4, method="exact")
    loss = bivariate_epsilon(cal.a, 100, cal.population, cal.prior_rate, cal.lower, cal.upper)
    assert np.all(loss <= 1.0)
    # Smallest: 1 % less of a_1 (above its floor) breaks the budget.
    smaller = cal.a.copy()
    smaller[0] *= 0.99
    assert (
        bivariate_epsilon(smaller, 100, cal.population, cal.prior_rate, cal.lower, cal.upper)[0]
        > 1.0
    )


positive = st.floats(0.5, 1e4, allow_nan=False)


@settings(max_examples=25, deadline=None)
@given(
    population=st.lists(positive, min_size=2, max_size=6),
    eps=st.floats(0.1, 5.0),
    mechanism=st.sampled_from(["pg", "truncated"]),
    method=st.sampled_from(["paper", "certified"]),
)
def test_shapes_grow_as_epsilon_shrinks(population, eps, mechanism, method):
    population = np.array(population)
    total = 50
    try:
        big = calibrate(mechanism, eps, total, population, method=method)
        small = calibrate(mechanism, eps / 2, total, population, method=method)
    except ValueError:
        return  # a paper calibration without solution, or a dominant cell: tested above
    assert np.all(small.a >= big.a - 1e-9 * big.a)
    if mechanism == "truncated":
        assert np.all(small.lower <= small.upper)
        assert small.lower.dtype.kind == "i"
        floor = np.where(small.lower == 0, 1 / 3, 1e-3)
        assert np.all(small.a >= floor)


@settings(max_examples=15, deadline=None)
@given(
    population=st.lists(positive, min_size=2, max_size=5),
    mechanism=st.sampled_from(["md", "pg", "truncated"]),
)
def test_calibration_ignores_confidential_counts(population, mechanism):
    # calibrate takes no counts: two calls with the same public inputs give equal objects,
    # whatever dataset they are later used with.
    method = "paper" if mechanism == "md" else "certified"
    first = calibrate(mechanism, 1.0, 30, population, method=method)
    second = calibrate(mechanism, 1.0, 30, list(population), method=method)
    assert first == second


def test_exact_bivariate_for_many_cells_is_feasible_and_tight():
    # I > 64 takes the vectorised Gauss-Seidel path with the Illinois root finder.
    rng = np.random.default_rng(8)
    population = np.round(rng.lognormal(4.0, 1.0, 80)) + 1
    population[:10] = population[10]  # repeated (n, lambda0): one shared solve
    cal = calibrate("truncated", 1.0, 120, population, method="exact", tail=0.01)
    loss = bivariate_epsilon(cal.a, 120, cal.population, cal.prior_rate, cal.lower, cal.upper)
    assert np.all(loss <= 1.0)
    above_floor = cal.a > np.where(cal.lower == 0, 1 / 3, 1e-3) * (1 + 1e-6)
    assert above_floor.any()
    np.testing.assert_allclose(loss[above_floor], 1.0, rtol=1e-5)
    np.testing.assert_array_equal(cal.a[:10], cal.a[10])


@pytest.mark.parametrize("epsilon", [0.01, 0.05])
def test_exact_many_cells_small_epsilon_is_feasible_and_tight(epsilon):
    # Small eps: large shapes feed back strongly through a_(i); the solver must still
    # return shapes whose exact bivariate loss is within eps (and close to it).
    rng = np.random.default_rng(4)
    n = rng.lognormal(8, 1, 120)
    rate = rng.uniform(5e-4, 2e-3, 120)
    total = int((n * rate).sum())
    cal = calibrate("truncated", epsilon, total, n, rate, method="exact")
    loss = bivariate_epsilon(cal.a, total, n, rate, cal.lower, cal.upper)
    assert loss.max() <= epsilon
    assert loss.max() > 0.99 * epsilon


def test_pg_paper_shapes_of_many_rows_are_each_rows_own_bit_for_bit():
    """pg_paper_shapes_rows (the sanitised arm's datasets at once) gives every row exactly
    what pg_paper_shapes gives it alone, rows converging after different iterations."""
    from dpcounts.privacy.paper import pg_paper_shapes, pg_paper_shapes_rows

    rng = np.random.default_rng(11)
    for cells, datasets in ((2, 6), (9, 6), (500, 6), (300, 41)):  # 41: blocks of 16 + 9
        population = rng.uniform(50, 1e6, cells)
        for epsilon in (0.01, 0.7, 12.0):
            prior = rng.uniform(1e-5, 1e-3, (datasets, cells))
            prior *= rng.uniform(0.2, 5, (datasets, 1))
            totals = rng.integers(cells, 30 * cells, datasets)
            rows = pg_paper_shapes_rows(epsilon, totals, population, prior)
            alone = [
                pg_paper_shapes(epsilon, int(t), population, p)
                for t, p in zip(totals, prior, strict=True)
            ]
            np.testing.assert_array_equal(rows, np.stack(alone))


def test_pg_paper_shapes_rows_name_a_dataset_without_a_solution_in_a_later_block():
    """A dataset past the first block with no solution (one event, one cell's prior rate
    far below the other's, so nu_i reaches e^epsilon) is named by its own row number."""
    from dpcounts.privacy.paper import BLOCK_ROWS, pg_paper_shapes, pg_paper_shapes_rows

    population, epsilon, bad = np.array([532_645.68, 165_386.84]), 0.0275, BLOCK_ROWS + 3
    prior = np.full((BLOCK_ROWS + 5, 2), 6.5e-4)
    prior[bad] = [6.5e-4, 2e-7]
    totals = np.full(BLOCK_ROWS + 5, 500)
    totals[bad] = 1
    with pytest.raises(ValueError) as alone:
        pg_paper_shapes(epsilon, 1, population, prior[bad])
    with pytest.raises(ValueError, match=f"for dataset {bad}: ") as rows:
        pg_paper_shapes_rows(epsilon, totals, population, prior)
    assert str(alone.value).split(": ")[1] == str(rows.value).split(": ")[1]  # nu_i's value


def test_pg_paper_shapes_rows_want_one_total_per_row_of_rates():
    from dpcounts.privacy.paper import pg_paper_shapes_rows

    population = np.array([10.0, 1e6])
    prior = np.full((2, 2), 1e-3)
    with pytest.raises(ValueError, match="one total per row"):
        pg_paper_shapes_rows(1.0, np.array([50]), population, prior)
    with pytest.raises(ValueError, match=r"prior_rates must be \(datasets, 2\)"):
        pg_paper_shapes_rows(1.0, np.array([50, 50]), population, prior[0])
