"""The attacker who reads the published hyperparameters (issue #53, item 2): they are made
from public inputs only, so alone they guess what the prior guesses; with the synthetic
sets, the posterior mode of each small true count."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from workflow_helpers import filled_definition

from dpcounts.arms import Arm
from dpcounts.attack.guesses import (
    hyperparameter_guess,
    posterior_guess,
    prior_guess,
    range_prior_guess,
    set_log_likelihood,
    total_tilts,
)
from dpcounts.privacy.calibrate import calibrate
from dpcounts.sampling.study_mode import StudySampler
from dpcounts.studies.stage.simulate import calibrate_arm

ARMS = [("md", "paper"), ("pg", "certified"), ("truncated", "certified")]


def strata(y, seed=0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    n = rng.integers(2_000, 20_000, len(y)).astype(float)
    return pd.DataFrame({"area": [f"a{k}" for k in range(len(y))], "y": y, "n": n,
                         "prior_rate": rng.uniform(2e-4, 8e-4, len(y))})  # fmt: skip


@pytest.mark.parametrize("mechanism, method", ARMS)
def test_the_hyperparameters_are_the_same_for_any_counts_of_the_total(mechanism, method):
    """Two tables of other counts but the same total and public inputs get the same
    calibration, so the hyperparameters cannot tell them apart; their guess is the
    prior's (pg, truncated: n lambda0 rounded; md: the uniform table y. / I)."""
    rng = np.random.default_rng(1)
    y = rng.poisson(4.0, 40)
    first = strata(y)
    second = first.assign(y=rng.permutation(y))
    second.loc[0, "y"] += 3
    second.loc[1, "y"] -= min(3, second.loc[1, "y"])
    second.loc[2, "y"] += y.sum() - second["y"].sum()  # the same total, other counts
    assert (second["y"] >= 0).all() and not np.array_equal(first["y"], second["y"])
    d = filled_definition("s", {"table": "t.csv", "keys": ["area"], "count": "y",
                                "population": "n", "arms": {mechanism: [method]}})  # fmt: skip
    arm = Arm(mechanism, method)
    cal = calibrate_arm(d, arm, 1.0, first)
    assert cal == calibrate_arm(d, arm, 1.0, second)
    guess = hyperparameter_guess(cal)
    if mechanism == "md":
        expected = np.full(y.size, y.sum() / y.size)
    else:
        expected = first["n"].to_numpy() * first["prior_rate"].to_numpy()
    assert np.array_equal(guess, prior_guess(expected))


@pytest.mark.parametrize("mechanism, method, epsilon", [
    (*ARMS[0], 2.0), (*ARMS[1], 2.0),
    pytest.param(*ARMS[2], 0.5, marks=pytest.mark.slow),  # truncated: about 20 s
])  # fmt: skip
def test_a_cells_likelihood_is_what_the_sampler_draws(mechanism, method, epsilon):
    """Of 4,000 sets drawn by the study's sampler, one small cell's synthetic counts are
    distributed as set_log_likelihood says at its true count (total variation below 0.04;
    pg and truncated tilted by each set's estimate of the total's tilt)."""
    rng = np.random.default_rng(2)
    frame = strata(np.zeros(60, dtype=int), 3)
    y = rng.poisson(frame["n"] * frame["prior_rate"])
    y[0] = 4
    frame["y"] = y
    cal = calibrate(mechanism, epsilon, int(y.sum()), frame["n"].to_numpy(),
                    frame["prior_rate"].to_numpy(), method=method)  # fmt: skip
    sets = StudySampler(y, cal).draw(4_000, rng)
    z = sets[:, 0]
    values = np.arange(0, max(int(z.max()), 40) + 1)
    grid = np.zeros((values.size, cal.n_cells), dtype=np.int64)
    grid[:, 0] = values
    if mechanism == "md":
        pmf = np.exp(set_log_likelihood(grid, cal, [y[0]])[0, :, 0])
    else:  # each set's own tilt: the law of cell 0 is the mixture over the sets
        tilts = total_tilts(sets, cal)
        pmf = np.mean([np.exp(set_log_likelihood(grid, cal, [y[0]], np.full(values.size, t))
                              [0, :, 0]) for t in tilts[:400]], axis=0)  # fmt: skip
    assert pmf.sum() == pytest.approx(1.0, abs=0.01)
    empirical = np.bincount(z, minlength=values.size) / z.size
    assert 0.5 * np.abs(empirical - pmf).sum() < 0.04


def test_with_no_set_the_posterior_is_the_priors_mode_in_the_range():
    expected = np.array([0.2, 2.7, 5.5, 8.01, 12.3, 4.0001])
    assert range_prior_guess(expected, 1, 9).tolist() == [1, 2, 5, 8, 9, 4]
    frame = strata(np.full(6, 3))
    n = frame["n"].to_numpy()
    cal = calibrate("pg", 1.0, 18, n, expected / n, method="certified")
    assert np.array_equal(posterior_guess(np.zeros((0, 6)), cal), range_prior_guess(expected))
    md = calibrate("md", 1.0, 19, n, method="paper")  # its own predictive mean: 19 / 6
    assert (posterior_guess(np.zeros((0, 6)), md) == 3).all()  # the mode of Poisson(3.17)
    given = posterior_guess(np.zeros((0, 6)), md, prior_expected=expected)
    assert np.array_equal(given, range_prior_guess(expected))


@pytest.mark.parametrize("mechanism, method", ARMS)
def test_many_sets_at_a_large_epsilon_give_the_counts_away(mechanism, method):
    """At epsilon 10 with 300 sets the posterior mode finds nearly every small count (of
    truncated, those strictly inside the bounds: one at or beyond a bound is clamped); at
    epsilon 0.01 with one set it guesses no better than told the range alone."""
    rng = np.random.default_rng(4)
    y = rng.integers(1, 10, 50)
    frame = strata(y, 5)
    n, prior = frame["n"].to_numpy(), frame["prior_rate"].to_numpy()
    total = int(y.sum())
    cal = calibrate(mechanism, 10.0, total, n, prior, method=method)
    found = posterior_guess(StudySampler(y, cal).draw(300, rng), cal)
    expected = n * prior if mechanism != "md" else np.full(50, total / 50)
    alone = range_prior_guess(expected)
    inside = (y > cal.lower) & (y < cal.upper) if cal.truncated else np.ones(50, dtype=bool)
    assert inside.sum() >= 20 and np.mean(found[inside] == y[inside]) >= 0.9
    weak = calibrate(mechanism, 0.01, total, n, prior, method=method)
    one = posterior_guess(StudySampler(y, weak).draw(1, rng), weak)
    assert np.mean(one == alone) >= 0.9


def test_the_posterior_shares_are_written_per_release():
    from dpcounts.studies.stage.measures import POSTERIOR, posterior_shares

    rng = np.random.default_rng(6)
    y = np.concatenate([rng.integers(1, 10, 30), [40, 0]])
    frame = strata(y, 7)
    cal = calibrate("pg", 5.0, int(y.sum()), frame["n"].to_numpy(),
                    frame["prior_rate"].to_numpy(), method="certified")  # fmt: skip
    tables = StudySampler(y, cal).draw(5, rng)
    shares = posterior_shares(tables, y, cal, 1, 9, 2)
    exact = shares[POSTERIOR[0]]
    assert np.isnan(exact[[1, 3, 4]]).all()
    for first in (0, 2):
        guess = posterior_guess(tables[first : first + 2], cal)[:30]
        assert exact[first] == np.mean(guess == y[:30])
        assert shares[POSTERIOR[1]][first] == np.mean(np.abs(guess - y[:30]) <= 1)
