"""Suppression baseline: the CDC WONDER rule, single-in-margin complementary suppression
and the analyst's completions."""

import numpy as np
import pandas as pd
import pytest

from dpcounts.baselines.suppression import SuppressionRule, margin_groups


def grid(rows: int, cols: int) -> pd.DataFrame:
    """Keys of a rows x cols table in row-major order."""
    r, c = np.meshgrid(np.arange(rows), np.arange(cols), indexing="ij")
    return pd.DataFrame({"row": r.ravel(), "col": c.ravel()})


def test_primary_hides_one_to_nine_and_shows_zeros():
    counts = np.array([0, 1, 5, 9, 10, 250])
    assert SuppressionRule().suppress(counts).tolist() == [False, True, True, True, False, False]


def test_primary_hides_zeros_when_asked():
    counts = np.array([0, 1, 9, 10])
    rule = SuppressionRule(show_zeros=False)
    assert rule.suppress(counts).tolist() == [True, True, True, False]


def test_primary_other_thresholds():
    counts = np.array([0, 1, 2, 4, 5])
    assert SuppressionRule(low=2, high=4).suppress(counts).tolist() == [
        False,
        False,
        True,
        True,
        False,
    ]


def test_single_in_margin_by_hand():
    # [[3, 20, 30], [40, 50, 60]]: 3 is hidden; its row then holds one hidden cell, so 20
    # (the row's smallest shown) goes; then columns 0 and 1 hold one each: 40 and 50 go.
    counts = np.array([3, 20, 30, 40, 50, 60])
    rule = SuppressionRule(complementary="single-in-margin")
    mask = rule.suppress(counts, grid(2, 3), [("row",), ("col",)])
    assert mask.tolist() == [True, True, False, True, True, False]


def test_single_in_margin_ties_to_the_lower_index_and_skips_zeros():
    # row 0: [4, 0, 12, 12]: the zero is shown and is no candidate while a nonzero cell is;
    # the two 12s tie, the first goes.
    counts = np.array([4, 0, 12, 12])
    keys = pd.DataFrame({"row": [0, 0, 0, 0]})
    mask = SuppressionRule(complementary="single-in-margin").suppress(counts, keys, [("row",)])
    assert mask.tolist() == [True, False, True, False]


def test_single_in_margin_takes_a_zero_when_nothing_else_is_shown():
    counts = np.array([4, 0, 0])
    keys = pd.DataFrame({"row": [0, 0, 0]})
    mask = SuppressionRule(complementary="single-in-margin").suppress(counts, keys, [("row",)])
    assert mask.tolist() == [True, True, False]


@pytest.mark.parametrize("seed", range(6))
def test_single_in_margin_reaches_a_fixed_point(seed):
    rng = np.random.default_rng(seed)
    keys = pd.DataFrame(
        {name: values.ravel() for name, values in zip("abc", np.indices((6, 4, 3)), strict=True)}
    )
    counts = rng.poisson(rng.choice([2.0, 15.0, 40.0], size=len(keys)))
    margins = [("a",), ("b",), ("a", "b"), ("a", "c"), ("b", "c")]
    rule = SuppressionRule(complementary="single-in-margin")
    mask = rule.suppress(counts, keys, margins)
    primary = rule.primary(counts)
    assert np.all(mask >= primary)
    # no group of any margin holds exactly one hidden cell beside a shown one
    for code in margin_groups(keys, margins, len(keys)):
        hidden = np.bincount(code, weights=mask)
        shown = np.bincount(code, weights=~mask)
        assert not np.any((hidden == 1) & (shown > 0))
    # and the same table gives the same mask
    assert np.array_equal(mask, rule.suppress(counts, keys, margins))


def test_single_in_margin_leaves_a_one_cell_group():
    # a margin group of one cell (the cell itself) cannot be protected
    counts = np.array([5, 30])
    keys = pd.DataFrame({"row": [0, 1]})
    mask = SuppressionRule(complementary="single-in-margin").suppress(counts, keys, [("row",)])
    assert mask.tolist() == [True, False]


def test_completions():
    counts = np.array([0, 3, 40, 7])
    rule = SuppressionRule()
    mask = rule.suppress(counts)
    assert np.isnan(rule.complete(counts, mask, "missing")[[1, 3]]).all()
    assert rule.complete(counts, mask, "zero").tolist() == [0, 0, 40, 0]
    assert rule.complete(counts, mask, "midpoint").tolist() == [0, 5, 40, 5]
    prior = np.array([0.2, 0.3, 35.0, 12.5])
    assert rule.complete(counts, mask, "prior", prior).tolist() == [0, 1, 40, 9]
    assert SuppressionRule(show_zeros=False).complete(counts, counts <= 9, "midpoint").tolist() == [
        4.5,
        4.5,
        40,
        4.5,
    ]


def test_prior_completion_of_a_complementary_cell_is_clipped_to_the_primary_range():
    counts = np.array([3, 20, 30])
    mask = np.array([True, True, False])
    out = SuppressionRule().complete(counts, mask, "prior", [2.4, 19.0, 30.0])
    assert out.tolist() == [2.4, 9.0, 30.0]


def test_attacker_bounds():
    counts = np.array([0, 3, 20, 30])
    mask = np.array([False, True, True, False])
    lower, upper = SuppressionRule().bounds(counts, mask)
    assert lower[1:3].tolist() == [1, 0] and upper[1:3].tolist() == [9, np.inf]
    lower, upper = SuppressionRule(show_zeros=False).bounds(np.array([0, 20]), np.array([1, 1]) > 0)
    assert lower.tolist() == [0, 10] and upper.tolist() == [9, np.inf]


@pytest.mark.parametrize(
    "settings, message",
    [
        ({"low": 0}, "1 <= low <= high"),
        ({"low": 5, "high": 4}, "1 <= low <= high"),
        ({"low": 1.5}, "low must be an integer"),
        ({"show_zeros": "yes"}, "show_zeros"),
        ({"complementary": "cell-swap"}, "complementary must be None or one of"),
    ],
)
def test_bad_rule(settings, message):
    with pytest.raises(ValueError, match=message):
        SuppressionRule(**settings)


def test_bad_input():
    rule = SuppressionRule(complementary="single-in-margin")
    counts = np.array([1, 20])
    keys = pd.DataFrame({"row": [0, 0]})
    with pytest.raises(ValueError, match="non-negative"):
        rule.primary(np.array([1, -2]))
    with pytest.raises(ValueError, match="1-D"):
        rule.primary(np.ones((2, 2), dtype=int))
    with pytest.raises(ValueError, match="integers"):
        rule.primary(np.array([1.5, 2.0]))
    with pytest.raises(ValueError, match="needs keys"):
        rule.suppress(counts)
    with pytest.raises(ValueError, match="not columns of the keys"):
        rule.suppress(counts, keys, [("county",)])
    with pytest.raises(ValueError, match="tuple of key names"):
        rule.suppress(counts, keys, ["row"])
    with pytest.raises(ValueError, match="one row per count"):
        rule.suppress(np.array([1, 2, 3]), keys, [("row",)])
    with pytest.raises(ValueError, match="completion must be one of"):
        rule.complete(counts, counts < 10, "mean")
    with pytest.raises(ValueError, match="needs prior_expected"):
        rule.complete(counts, counts < 10, "prior")
    with pytest.raises(ValueError, match="one entry per count"):
        rule.complete(counts, counts < 10, "prior", [1.0])
    with pytest.raises(ValueError, match="mask must be a boolean"):
        rule.complete(counts, np.array([1, 0]), "zero")
    with pytest.raises(ValueError, match="primary suppression hides"):
        rule.bounds(counts, np.array([False, False]))
