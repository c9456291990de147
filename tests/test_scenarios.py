from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from dpcounts.data.scenarios import draw_datasets, make_scenario

POP = np.array([1000.0, 5000.0, 20000.0, 400.0])
RATE = np.array([2e-4, 1e-4, 3e-4, 5e-4])


@pytest.mark.parametrize("number", [1, 2, 3, 4])
def test_scenarios_share_n_total_and_total(number):
    s = make_scenario(number, POP, RATE, total=50)
    assert s.population.sum() == pytest.approx(POP.sum())
    assert s.total == 50
    assert s.cell_probabilities.sum() == pytest.approx(1.0)


def test_scenario_definitions():
    s1 = make_scenario(1, POP, RATE, 50)
    assert np.allclose(s1.population, POP.mean()) and np.allclose(s1.rate, 50 / POP.sum())
    s2 = make_scenario(2, POP, RATE, 50)
    assert np.array_equal(s2.population, POP) and np.allclose(s2.rate, 50 / POP.sum())
    s3 = make_scenario(3, POP, RATE, 50)
    assert np.allclose(s3.population, POP.mean()) and np.array_equal(s3.rate, RATE)
    s4 = make_scenario(4, POP, RATE, 50)
    assert np.array_equal(s4.population, POP) and np.array_equal(s4.rate, RATE)
    # Scenario 1: every county is alike, so every cell is equally likely.
    assert np.allclose(s1.cell_probabilities, 0.25)


def test_datasets_are_the_conditioned_poisson():
    s = make_scenario(4, POP, RATE, total=40)
    y = draw_datasets(s, 20_000, np.random.default_rng(1))
    assert y.shape == (20_000, 4) and np.all(y.sum(axis=1) == 40)
    # Marginal of cell 0 is Binomial(y., pi_0).
    observed = np.bincount(y[:, 0], minlength=41)
    expected = stats.binom.pmf(np.arange(41), 40, s.cell_probabilities[0]) * len(y)
    keep = expected > 5
    chi2 = ((observed[keep] - expected[keep]) ** 2 / expected[keep]).sum()
    assert stats.chi2.sf(chi2, keep.sum() - 1) > 1e-3


@pytest.mark.parametrize(
    ("args", "message"),
    [((5, POP, RATE, 10), "scenario"), ((1, POP, RATE[:2], 10), "same length")],
)
def test_bad_arguments(args, message):
    with pytest.raises(ValueError, match=message):
        make_scenario(*args)
