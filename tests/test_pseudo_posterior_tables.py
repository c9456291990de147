"""The study's checks and the order of its synthesizers, on hand-made tables (no MCMC)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dpcounts.studies.pseudo_posterior.study import StudySettings, run_synthesizer
from dpcounts.studies.pseudo_posterior.tables import study_checks


def summary(change=None):
    frame = pd.DataFrame(
        {
            "synthesizer": ["unweighted", "LW", "CW", "SW", "LW_final", "CW_final"],
            "delta_gap": [np.nan, np.nan, 0.01, -0.02, 0.0, 0.02],
            "mu_interval_width": [1.0, 1.2, 1.3, 2.0, 1.1, 1.2],
            "share_weight_below_half": [0.0, 0.01, 0.1, 1.0, 0.0, 0.02],
            "min_weight_increase": [np.nan] * 4 + [0.0, 0.0],
            "delta_change": [np.nan] * 4 + [0.01, -0.02],
        }
    ).set_index("synthesizer")
    for (name, column), value in (change or {}).items():
        frame.at[name, column] = value
    return frame.reset_index()


def verdicts(frame, tolerance=0.03):
    return {c["check"]: c["passed"] for c in study_checks(frame, tolerance)}


def test_the_seed_claims_pass_on_a_table_that_shows_them():
    assert all(verdicts(summary()).values())


@pytest.mark.parametrize(
    ("change", "check"),
    [
        ({("SW", "mu_interval_width"): 1.0}, "sw_interval_wider_than_lw"),
        ({("CW", "share_weight_below_half"): 0.01}, "cw_downweights_more_than_lw"),
        ({("CW", "delta_gap"): 0.05}, "CW_delta_matches_target"),
        ({("LW_final", "min_weight_increase"): -0.01}, "LW_final_raises_every_weight"),
        ({("CW_final", "delta_change"): -0.1}, "CW_final_keeps_delta"),
    ],
)
def test_each_check_fails_when_its_claim_does_not_hold(change, check):
    result = verdicts(summary(change))
    assert result[check] is False
    assert sum(not passed for passed in result.values()) == 1


def test_a_synthesizer_needs_the_fits_it_depends_on():
    settings = StudySettings(family="poisson", lipschitz_quantile=0.95)
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="needs the fits of"):
        run_synthesizer("CW", np.arange(5), settings, {}, rng)
    with pytest.raises(ValueError, match="synthesizer must be one of"):
        run_synthesizer("XW", np.arange(5), settings, {}, rng)
