"""Exact audit of whole releases (prior, every set) through the code that releases."""

from __future__ import annotations

import numpy as np
import pytest

from dpcounts.privacy.release_audit import audit_release
from dpcounts.release.design import Design
from dpcounts.release.request import Budget


def random_instance(rng, mechanism):
    n_cells = int(rng.integers(2, 4))
    total = int(rng.integers(2, 7 if n_cells == 2 else 5))
    population = rng.integers(50, 500, n_cells).astype(float)
    rate = rng.uniform(0.5, 2.0, n_cells) * total / population.sum()
    epsilon = float(rng.choice([0.5, 1.0, 2.0]))
    sets = int(rng.integers(1, 4))
    return n_cells, total, population, rate, epsilon, sets


@pytest.mark.parametrize("mechanism", ["md", "pg", "truncated"])
def test_certified_whole_releases_keep_their_total(mechanism):
    rng = np.random.default_rng({"md": 1, "pg": 2, "truncated": 3}[mechanism])
    checked = 0
    while checked < 4:
        n_cells, total, population, rate, epsilon, sets = random_instance(rng, mechanism)
        design = Design(mechanism, "certified", Budget(epsilon, 1e-12, 0.0, sets))
        try:
            design.calibrate(total, population, rate)
        except ValueError:  # infeasible truncation bounds for this instance
            continue
        audit = audit_release(design, population, total, prior_rate=rate)
        assert audit.epsilon <= epsilon * (1 + 1e-9), audit
        assert audit.delta <= 1e-12 and audit.unmatched <= 1e-12, audit
        checked += 1


@pytest.mark.slow
@pytest.mark.parametrize(
    ("mechanism", "population", "groups"),
    [("pg", [120.0, 300.0, 80.0], [0, 1, 1]), ("truncated", [120.0, 300.0], [0, 1])],
)
def test_whole_release_with_a_sanitised_prior(mechanism, population, groups):
    population = np.array(population)
    design = Design(mechanism, "certified", Budget(3.0, 1e-12, 2.0, 2))
    audit = audit_release(design, population, 4, groups=groups, window=12)
    assert audit.epsilon <= 3.0 * (1 + 1e-9), audit
    assert audit.delta <= 1e-12 and audit.unmatched <= 1e-12, audit
    assert audit.window_mass_outside < 1e-5
    # the prior's noise is part of what is audited: with it the loss exceeds the sets' share
    assert audit.epsilon > 1.0, audit


def test_sets_compose_the_old_manifest_understated_them():
    """Two sets at a per-set epsilon cost about twice it: the pre-#12 manifest said once."""
    population, rate = np.array([100.0, 300.0, 50.0]), np.array([0.01, 0.02, 0.05])
    one = audit_release(
        Design("pg", "certified", Budget(1.0, 1e-12, 0.0, 1)), population, 5, prior_rate=rate
    )
    two = audit_release(
        Design("pg", "certified", Budget(2.0, 1e-12, 0.0, 2)), population, 5, prior_rate=rate
    )
    assert two.epsilon == pytest.approx(2 * one.epsilon, rel=1e-9)
    assert two.epsilon > 1.0  # what the old manifest claimed for the pair ("epsilon": 1)
    assert two.epsilon <= 2.0
