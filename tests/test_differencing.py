"""Differencing attack: the feasible ranges of suppressed cells, by hand, against brute force,
propagation against the LP, the blocks of a large component against its whole LP, and the
sampled shares' intervals."""

import itertools

import numpy as np
import pandas as pd
import pytest

from dpcounts.attack.differencing import (
    default_margins,
    feasible_ranges,
    implied_margins,
    propagate,
)
from dpcounts.baselines.suppression import SuppressionRule, margin_groups


def grid(*shape: int, names: str = "abcd") -> pd.DataFrame:
    """Keys of a table of this shape in row-major order."""
    return pd.DataFrame(
        {name: values.ravel() for name, values in zip(names, np.indices(shape), strict=False)}
    )


def ranges_of(result):
    lower, upper = result.integer_lower.astype(int), result.integer_upper.astype(int)
    return list(zip(lower.tolist(), upper.tolist(), strict=True))


def test_default_margins():
    assert default_margins(["county", "race", "sex"]) == [
        ("county",),
        ("race",),
        ("sex",),
        ("county", "race"),
        ("county", "sex"),
        ("race", "sex"),
    ]
    assert implied_margins([("a",), ("b",), ("a", "b"), ("a",), ()]) == [0, 1, 3, 4]


def test_a_cell_alone_in_its_row_is_pinned():
    # [[3, 20], [15, 40]] with row and column totals: 3 = 23 - 20
    counts = np.array([3, 20, 15, 40])
    result = feasible_ranges(counts, counts < 10, grid(2, 2), [("a",), ("b",)])
    assert ranges_of(result) == [(3, 3)]
    assert result.method.tolist() == ["propagation"]
    assert result.summary()["pinned"]["estimate"] == 1.0


def test_a_rectangle_of_four_is_not_pinned():
    # [[3, 5], [4, 2]] all hidden: x00 = t, x01 = 8 - t, x10 = 7 - t, x11 = t - 1 with every
    # cell in [1, 9]: t in [2, 6]
    counts = np.array([3, 5, 4, 2])
    result = feasible_ranges(counts, counts < 10, grid(2, 2), [("a",), ("b",)])
    assert ranges_of(result) == [(2, 6), (2, 6), (1, 5), (1, 5)]
    summary = result.summary()
    assert summary["pinned"]["estimate"] == 0.0
    assert summary["within_one"]["estimate"] == 0.0
    assert summary["mean_width"]["estimate"] == 4.0


def test_a_rectangle_cut_by_the_bounds():
    # [[1, 8, 30], [8, 1, 30]]: x00 = t, x01 = 9 - t, x10 = 9 - t, x11 = t, t in [1, 8]
    # makes every cell's range [1, 8]; with the zeros hidden too, [0, 9]
    counts = np.array([1, 8, 30, 8, 1, 30])
    keys = grid(2, 3)
    margins = [("a",), ("b",)]
    result = feasible_ranges(counts, (counts < 10), keys, margins)
    assert ranges_of(result) == [(1, 8)] * 4
    rule = SuppressionRule(show_zeros=False)
    result = feasible_ranges(counts, rule.suppress(counts), keys, margins, rule=rule)
    assert ranges_of(result) == [(0, 9)] * 4


def test_complementary_cells_protect_the_hidden_one():
    # [[3, 20, 30], [40, 50, 60]]: hidden 3, 20, 40, 50 (test_suppression); x00 = t in
    # [1, 9], x01 = 23 - t, x10 = 43 - t, x11 = 47 + t
    counts = np.array([3, 20, 30, 40, 50, 60])
    keys = grid(2, 3, names=("row", "col"))
    rule = SuppressionRule(complementary="single-in-margin")
    margins = [("row",), ("col",)]
    mask = rule.suppress(counts, keys, margins)
    result = feasible_ranges(counts, mask, keys, margins, rule=rule)
    assert ranges_of(result) == [(1, 9), (14, 22), (34, 42), (48, 56)]
    # without the complement, the 3 is its row's total less the row's shown cells
    alone = feasible_ranges(counts, rule.primary(counts), keys, margins)
    assert ranges_of(alone) == [(3, 3)]


def test_a_cell_no_margin_bounds_is_unbounded():
    # x0 + x1 = 23, x0 in [1, 9], x1 >= 0: x1 in [14, 22]; with no margin, x1 unbounded
    counts = np.array([3, 20])
    hidden, keys, bounds = (
        np.array([True, True]),
        pd.DataFrame({"a": [0, 0]}),
        ([1, 0], [9, np.inf]),
    )
    result = feasible_ranges(counts, hidden, keys, [("a",)], bounds=bounds)
    assert ranges_of(result) == [(1, 9), (14, 22)]
    result = feasible_ranges(counts, hidden, keys, [], bounds=bounds)
    assert result.integer_upper.tolist() == [9, np.inf]
    assert result.summary()["mean_width"]["estimate"] == np.inf


def brute_force(counts, mask, keys, margins, low, high):
    """The integer range of each hidden cell by enumerating every completion."""
    hidden = np.flatnonzero(mask)
    codes = margin_groups(keys, margins, counts.size)
    values = np.array(list(itertools.product(range(low, high + 1), repeat=hidden.size)))
    ok = np.ones(len(values), dtype=bool)
    for code in codes:
        for group in np.unique(code[hidden]):
            members = code[hidden] == group
            total = counts[hidden][members].sum()
            ok &= values[:, members].sum(axis=1) == total
    feasible = values[ok]
    return list(zip(feasible.min(axis=0).tolist(), feasible.max(axis=0).tolist(), strict=True))


@pytest.mark.parametrize("seed", range(8))
def test_two_way_tables_match_brute_force(seed):
    # row and column totals: a transportation polytope, whose vertices are integers, so
    # the LP's range is the integer range
    rng = np.random.default_rng(seed)
    counts = rng.choice([2, 4, 7, 12, 30], size=20, p=[0.1, 0.1, 0.1, 0.35, 0.35])
    mask = counts < 10
    while mask.sum() > 6:
        mask[rng.choice(np.flatnonzero(mask))] = False
        counts[~mask & (counts < 10)] += 10
    keys = grid(4, 5)
    margins = [("a",), ("b",)]
    result = feasible_ranges(counts, mask, keys, margins)
    assert ranges_of(result) == brute_force(counts, mask, keys, margins, 1, 9)


def random_table(seed, shape=(5, 3, 2, 3)):
    rng = np.random.default_rng(seed)
    keys = grid(*shape)
    counts = rng.poisson(rng.choice([1.5, 4.0, 12.0], size=len(keys)))
    return counts, counts_mask(counts), keys


def counts_mask(counts):
    return SuppressionRule().suppress(counts)


@pytest.mark.parametrize("seed", range(6))
def test_propagation_contains_the_lp_and_agrees_where_it_pins(seed):
    counts, mask, keys = random_table(seed)
    result = feasible_ranges(counts, mask, keys)
    truth = counts[result.cells]
    assert np.all(result.lower <= truth + 1e-9) and np.all(truth <= result.upper + 1e-9)
    assert np.all(result.outer_lower <= result.lower + 1e-9)
    assert np.all(result.upper <= result.outer_upper + 1e-9)
    # propagation alone, from the rule's bounds
    lower, upper = SuppressionRule().bounds(counts, mask)
    codes = margin_groups(keys, default_margins(list(keys.columns)), counts.size)
    cell, group, offset = [], [], 0
    for code in codes:
        cell.append(np.arange(result.cells.size))
        group.append(code[result.cells] + offset)
        offset += code.max() + 1
    cell, group = np.concatenate(cell), np.unique(np.concatenate(group), return_inverse=True)[1]
    residual = np.bincount(group, weights=truth[cell])
    lo, hi = propagate(lower[mask], upper[mask], cell, group, residual)
    assert np.all(lo <= result.lower + 1e-9) and np.all(result.upper <= hi + 1e-9)
    pinned = hi == lo
    assert np.array_equal(result.lower[pinned], lo[pinned])
    assert np.array_equal(result.upper[pinned], hi[pinned])
    assert np.array_equal(result.method == "propagation", pinned)


@pytest.mark.parametrize("seed", range(6))
def test_one_margin_propagation_is_exact(seed):
    # one equality per group: the propagated bounds are the ranges, no LP is solved
    rng = np.random.default_rng(seed)
    keys = grid(6, 8)
    counts = rng.poisson(rng.choice([2.0, 6.0, 15.0], size=len(keys)))
    mask = counts_mask(counts)
    result = feasible_ranges(counts, mask, keys, [("a",)])
    assert result.lps == 0
    direct = feasible_ranges(counts, mask, keys, [("a",), ("a",)], batch=False)
    assert np.allclose(result.lower, direct.lower) and np.allclose(result.upper, direct.upper)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(3))
def test_blocks_agree_with_the_whole_lp(seed):
    # a component with linking margins (b x c, b x d, c x d over every a): the blocks'
    # small LPs (direct_cells=0) give the same ranges as the LPs of the whole component
    counts, mask, keys = random_table(100 + seed, shape=(12, 2, 2, 3))
    whole = feasible_ranges(counts, mask, keys)
    blocks = feasible_ranges(counts, mask, keys, direct_cells=0, max_block=12, helpers=2)
    assert whole.meta["largest_component"] > 20 and blocks.meta["blocks"] > 4
    assert blocks.meta["cell_lps"] < whole.meta["cell_lps"]
    assert np.allclose(whole.lower, blocks.lower, atol=1e-7)
    assert np.allclose(whole.upper, blocks.upper, atol=1e-7)


def test_lps_without_presolve_agree(monkeypatch):
    # a large component's LPs run without HiGHS's presolve: the same ranges
    from dpcounts.attack import differencing

    counts, mask, keys = random_table(5)
    default = feasible_ranges(counts, mask, keys, batch=False)
    monkeypatch.setattr(differencing, "PRESOLVE_CELLS", 0)
    without = feasible_ranges(counts, mask, keys, batch=False)
    assert default.meta["cell_lps"] > 5
    assert np.allclose(default.lower, without.lower, atol=1e-7)
    assert np.allclose(default.upper, without.upper, atol=1e-7)


@pytest.mark.process
def test_blocks_over_two_processes_agree_with_the_whole_lp():
    counts, mask, keys = random_table(101, shape=(12, 2, 2, 3))
    whole = feasible_ranges(counts, mask, keys)
    shared = feasible_ranges(counts, mask, keys, direct_cells=0, max_block=12, helpers=2, workers=2)
    assert shared.meta["blocks"] > 4
    assert np.allclose(whole.lower, shared.lower, atol=1e-7)
    assert np.allclose(whole.upper, shared.upper, atol=1e-7)


@pytest.mark.slow
def test_sampled_shares_cover_the_exact_ones():
    counts, mask, keys = random_table(7, shape=(20, 2, 2, 3))
    exact = feasible_ranges(counts, mask, keys, batch=False)
    truth = exact.summary()
    assert truth["exact"] == truth["cells"]
    covered = 0
    for seed in range(10):
        sampled = feasible_ranges(
            counts, mask, keys, batch=False, max_lps=30, rng=np.random.default_rng(seed)
        )
        summary = sampled.summary()
        assert summary["sampled"] > 0 and summary["unsampled"] > 0
        assert summary["exact"] + summary["sampled"] + summary["unsampled"] == summary["cells"]
        assert summary["pinned"]["low"] <= summary["pinned"]["estimate"]
        assert summary["pinned"]["estimate"] <= summary["pinned"]["high"]
        # a sampled cell's range is exact
        known = sampled.status != "unsampled"
        assert np.allclose(sampled.lower[known], exact.lower[known])
        covered += all(
            summary[name]["low"] <= truth[name]["estimate"] <= summary[name]["high"]
            for name in ("pinned", "within_one", "mean_width")
        )
    assert covered >= 8


def test_budget_large_enough_is_exact():
    counts, mask, keys = random_table(3)
    result = feasible_ranges(counts, mask, keys, max_lps=10_000, rng=np.random.default_rng(0))
    assert set(result.status) == {"exact"}


def test_bad_input():
    counts = np.array([3, 20, 15, 40])
    keys = grid(2, 2)
    with pytest.raises(ValueError, match="needs rng"):
        feasible_ranges(counts, counts < 10, keys, max_lps=3)
    with pytest.raises(ValueError, match="max_lps must be None or a non-negative"):
        feasible_ranges(counts, counts < 10, keys, max_lps=-1, rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match="contain the true count"):
        feasible_ranges(counts, counts < 10, keys, bounds=(np.full(4, 5.0), np.full(4, 9.0)))
    with pytest.raises(ValueError, match="not columns of the keys"):
        feasible_ranges(counts, counts < 10, keys, [("county",)])
    with pytest.raises(ValueError, match="mask must have one entry per count"):
        feasible_ranges(counts, np.array([True]), keys)
    with pytest.raises(ValueError, match="list of key names"):
        default_margins("county")
