"""The attacker's guesses of small true counts from DP synthetic sets and from the prior."""

import numpy as np
import pytest

from dpcounts.attack.guesses import attack_shares, mode_guess, prior_guess, recovery_shares


def test_mode_over_the_sets_ties_to_the_smaller():
    synthetic = np.array([[1, 2, 3, 7], [2, 2, 4, 0], [1, 3, 4, 7], [2, 3, 5, 0]])
    assert mode_guess(synthetic).tolist() == [1, 2, 4, 0]


def test_mode_of_one_set_is_the_set():
    assert mode_guess(np.array([[4, 0, 9]])).tolist() == [4, 0, 9]


def test_prior_guess_rounds_half_up():
    assert prior_guess([0.49, 0.5, 2.5, 3.2, 8.7]).tolist() == [0, 1, 3, 3, 9]


def test_recovery_shares_on_the_small_counts_only():
    truth = np.array([0, 1, 4, 9, 10, 50])
    guess = np.array([5, 1, 5, 7, 10, 0])
    # cells 1, 4 and 9: exact 1 of 3, within one 2 of 3 (the 0 and the 10, 50 not counted)
    assert recovery_shares(truth, guess) == {"cells": 3, "exact": 1 / 3, "within_one": 2 / 3}
    assert recovery_shares(truth, guess, low=10, high=50)["exact"] == 0.5
    assert np.isnan(recovery_shares(np.array([0, 20]), np.array([0, 20]))["exact"])


def test_attack_shares_compares_the_sets_with_the_prior():
    rng = np.random.default_rng(0)
    truth = rng.integers(1, 10, 400)
    # sets that are the truth plus noise in {-1, 0, 1}, 0 the likeliest
    noise = rng.choice([-1, 0, 1], size=(25, truth.size), p=[0.2, 0.6, 0.2])
    synthetic = np.maximum(truth + noise, 0)
    prior = np.full(truth.size, 5.0)
    shares = attack_shares(truth, synthetic, prior)
    assert shares["sets"] == 25
    assert shares["synthetic"]["exact"] > 0.95
    assert shares["synthetic"]["within_one"] == 1.0
    # the prior's 5 is exact for the truths of 5 only and within one for 4, 5, 6
    small = truth[(truth >= 1) & (truth <= 9)]
    assert shares["prior"]["exact"] == pytest.approx(np.mean(small == 5))
    assert shares["prior"]["within_one"] == pytest.approx(np.mean(np.abs(small - 5) <= 1))


def test_bad_input():
    with pytest.raises(ValueError, match="2-D"):
        mode_guess(np.array([1, 2]))
    with pytest.raises(ValueError, match="at least one set"):
        mode_guess(np.zeros((0, 3), dtype=int))
    with pytest.raises(ValueError, match="integers"):
        mode_guess(np.array([[1.5, 2.0]]))
    with pytest.raises(ValueError, match="non-negative"):
        prior_guess([-1.0])
    with pytest.raises(ValueError, match="one entry per count"):
        recovery_shares(np.array([1, 2]), np.array([1]))
    with pytest.raises(ValueError, match="one column per count"):
        attack_shares(np.array([1, 2]), np.zeros((3, 4), dtype=int), [1.0, 1.0])
