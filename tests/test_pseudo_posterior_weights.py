"""Weight algorithms of Hu et al. (2020) on hand-made log-likelihood matrices (no MCMC)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpcounts.studies.pseudo_posterior.equal_privacy import predicted_delta, scale_for_delta
from dpcounts.studies.pseudo_posterior.fitting import (
    ConvergenceError,
    ConvergenceThresholds,
    check_convergence,
)
from dpcounts.studies.pseudo_posterior.lipschitz import lipschitz_bounds
from dpcounts.studies.pseudo_posterior.posterior import PosteriorFit
from dpcounts.studies.pseudo_posterior.reweighting import reweight
from dpcounts.studies.pseudo_posterior.simulate import simulate_counts
from dpcounts.studies.pseudo_posterior.weights import (
    cw_weights,
    identification_risk,
    lw_weights,
    scale_weights,
)

# 4 draws x 3 records of log-likelihoods; per-draw maxima of |.| are 3, 5, 4, 9.
LOGLIK = -np.array(
    [
        [1.0, 3.0, 2.0],
        [5.0, 1.0, 1.0],
        [2.0, 4.0, 0.5],
        [9.0, 1.0, 1.0],
    ]
)


def test_overall_bound_is_the_quantile_of_per_draw_maxima():
    bounds = lipschitz_bounds(LOGLIK, 0.5)
    # median of (3, 5, 4, 9) with linear interpolation is 4.5: draws 1 and 4 are trimmed
    assert bounds.delta == pytest.approx(4.5)
    assert bounds.kept.tolist() == [True, False, True, False]
    assert bounds.record.tolist() == [2.0, 4.0, 2.0]
    assert bounds.epsilon == pytest.approx(9.0)


def test_quantile_one_keeps_every_draw():
    bounds = lipschitz_bounds(LOGLIK, 1.0)
    assert bounds.delta == 9.0
    assert bounds.record.tolist() == [9.0, 4.0, 2.0]


@pytest.mark.parametrize("quantile", [0.0, 1.5, -1])
def test_bad_quantile_is_named(quantile):
    with pytest.raises(ValueError, match="lipschitz_quantile"):
        lipschitz_bounds(LOGLIK, quantile)


def test_weighted_bounds_scale_with_the_weights():
    weights = np.array([0.5, 1.0, 0.2])
    bounds = lipschitz_bounds(weights * LOGLIK, 1.0)
    # |weighted| rows: (.5, 3, .4), (2.5, 1, .2), (1, 4, .1), (4.5, 1, .2)
    assert bounds.delta == pytest.approx(4.5)
    assert bounds.record == pytest.approx([4.5, 4.0, 0.4])


def test_lw_weights_fall_linearly_with_the_rescaled_bound():
    assert lw_weights(np.array([1.0, 2.0, 3.0])) == pytest.approx([1.0, 0.5, 0.0])
    assert lw_weights(np.array([1.0, 2.0, 3.0]), c=0.8, g=0.3) == pytest.approx([1.0, 0.7, 0.3])
    # equal bounds carry equal (zero) risk
    assert lw_weights(np.array([2.0, 2.0])) == pytest.approx([1.0, 1.0])


def test_identification_risk_counts_records_outside_the_ball():
    y = np.array([0, 10, 10, 12, 50])
    # relative radius 0.1: balls {0}, [9, 11], [9, 11], [10.8, 13.2], [45, 55]
    assert identification_risk(y, 0.1) == pytest.approx([0.8, 0.6, 0.6, 0.8, 0.8])
    # absolute radius 2: [-2, 2], [8, 12], [8, 12], [10, 14], [48, 52]
    assert identification_risk(y, 2.0, relative=False) == pytest.approx([0.8, 0.4, 0.4, 0.4, 0.8])


def test_cw_weights_decrease_with_risk():
    y = np.array([0, 10, 10, 12, 50])
    weights = cw_weights(y, 0.1)
    assert weights == pytest.approx(1 - identification_risk(y, 0.1))
    assert weights[1] > weights[3]
    assert cw_weights(y, 0.1, c=0.5, g=0.6) == pytest.approx([0.7, 0.8, 0.8, 0.7, 0.7])


def test_scaled_weights_stay_in_the_unit_interval():
    assert scale_weights(np.array([0.2, 0.6]), 2.0) == pytest.approx([0.4, 1.0])
    with pytest.raises(ValueError, match="scale"):
        scale_weights(np.array([0.2]), -1.0)


def test_scale_for_delta_hits_the_target_on_the_same_draws():
    rng = np.random.default_rng(0)
    loglik = -rng.gamma(3.0, 1.0, size=(200, 30))
    base = rng.uniform(0.1, 1.0, size=30)
    target = 0.5 * predicted_delta(loglik, base, 0.9)
    scale = scale_for_delta(loglik, base, target, 0.9)
    assert predicted_delta(loglik, scale_weights(base, scale), 0.9) == pytest.approx(
        target, rel=1e-6
    )


@pytest.mark.parametrize("seed", range(3))
def test_scale_for_delta_is_the_bisection_over_every_record_to_the_bit(seed):
    """Records with the same count share a column of log-likelihoods; taking each column
    once with its records' largest weight gives the scale the bisection over every record
    gives, to the bit (ties of weights, weights of 0, a column of zeros included)."""
    from dpcounts.studies.pseudo_posterior.likelihood import record_loglik

    rng = np.random.default_rng(seed)
    y = rng.poisson(3.0, size=400)
    draws = {"mu": rng.gamma(30.0, 0.1, size=300), "phi": rng.gamma(5.0, 1.0, size=300)}
    loglik = record_loglik(y, draws, "negbin")
    loglik[:, y == y.max()] = 0.0  # a column of zeros
    base = rng.choice([0.0, 0.2, 0.35, 0.9, 1.0], size=y.size) * rng.uniform(0.5, 1, y.size)
    magnitude = np.abs(loglik)

    def delta_at(scale):  # every record, as the bisection read before
        weights = scale_weights(base, scale)
        return float(np.quantile((magnitude * weights[None, :]).max(axis=1), 0.9))

    target = 0.4 * delta_at(1.0 / base[base > 0].min())
    low, high = 0.0, 1.0 / base[base > 0].min()
    for _ in range(60):
        mid = 0.5 * (low + high)
        low, high = (mid, high) if delta_at(mid) < target else (low, mid)
    assert scale_for_delta(loglik, base, target, 0.9) == float(0.5 * (low + high))


def test_reweighting_by_hand():
    weights = np.array([1.0, 0.25, 0.1])
    unweighted = np.array([2.0, 4.0, 10.0])  # record bounds L = (2, 1, 1); Delta = 2
    result = reweight(weights, unweighted, 2.0)
    # slack (0, .5, .5); k = Delta / max B among records below Delta = 2 / 10
    assert result.constant == pytest.approx(0.2)
    assert result.weights == pytest.approx([1.0, 0.35, 0.2])
    assert result.bounds_after == pytest.approx([2.0, 1.4, 2.0])


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.floats(0.01, 1.0), st.floats(0.1, 20.0)), min_size=2, max_size=40))
def test_reweighting_raises_every_weight_and_keeps_the_maximum(pairs):
    weights, unweighted = (np.array(column) for column in zip(*pairs, strict=True))
    delta = float(np.max(weights * unweighted))
    result = reweight(weights, unweighted, delta)
    assert np.all(result.weights >= weights)
    assert np.all(result.weights <= 1.0)
    assert np.max(result.weights * unweighted) == pytest.approx(delta, rel=1e-12)


def test_failed_convergence_names_the_threshold():
    fit = PosteriorFit.from_draws(
        np.array([1, 2]),
        np.ones(2),
        {"mu": np.full(10, 1.5)},
        "poisson",
        2,
        rhat={"mu": 1.3},
        ess={"mu": 500.0},
    )
    with pytest.raises(ConvergenceError, match="max_rhat"):
        check_convergence(fit, ConvergenceThresholds(max_rhat=1.05, min_ess=100), "LW")
    fit.rhat["mu"], fit.ess["mu"] = 1.0, 20.0
    with pytest.raises(ConvergenceError, match="min_ess"):
        check_convergence(fit, ConvergenceThresholds(max_rhat=1.05, min_ess=100), "LW")


def test_simulated_mixture_has_the_configured_mean_and_bad_specs_are_named():
    rng = np.random.default_rng(1)
    components = [
        {"weight": 0.7, "mean": 10, "dispersion": 5},
        {"weight": 0.3, "mean": 60, "dispersion": None},
    ]
    y = simulate_counts(20000, components, rng)
    assert y.mean() == pytest.approx(0.7 * 10 + 0.3 * 60, rel=0.03)
    with pytest.raises(ValueError, match="sum to 1"):
        simulate_counts(10, [{"weight": 0.5, "mean": 1, "dispersion": None}], rng)
    with pytest.raises(ValueError, match="mean"):
        simulate_counts(10, [{"weight": 1.0, "mean": -1, "dispersion": None}], rng)


def test_equal_columns_are_numpys_unique_columns():
    """equal_columns (a few rows, then a check on all) gives np.unique's distinct columns,
    order and indices, also where columns agree on the first rows only."""
    from dpcounts.studies.pseudo_posterior.equal_privacy import equal_columns

    rng = np.random.default_rng(7)
    base = rng.normal(size=(50, 9))
    matrix = base[:, rng.integers(0, 9, 200)]  # repeated columns
    tricky = matrix.copy()
    tricky[30:, :5] += 1.0  # columns equal on the first rows, different below
    for case in (matrix, tricky, matrix[:3]):
        columns, group = equal_columns(case)
        expected, inverse = np.unique(case.T, axis=0, return_inverse=True)
        np.testing.assert_array_equal(columns, expected)
        np.testing.assert_array_equal(group, inverse.reshape(-1))
