"""The certified calibrations never exceed epsilon: exact audit on random small instances."""

import numpy as np
import pytest

from dpcounts import audit, calibrate

MAX_TOTAL = {2: 30, 3: 14, 4: 10}  # small enough for the audit to enumerate quickly


def random_instances(n, seed):
    """Instances with unequal populations and prior rates, truncated and not."""
    rng = np.random.default_rng(seed)
    out = []
    while len(out) < n:
        n_cells = int(rng.integers(2, 5))
        total = int(rng.integers(1, MAX_TOTAL[n_cells] + 1))
        population = rng.lognormal(3.0, 1.5, n_cells)
        prior_rate = rng.lognormal(-2.0, 1.0, n_cells)
        epsilon = float(rng.choice([0.1, 0.5, 1.0, 2.0, 4.0]) * rng.uniform(0.8, 1.2))
        mechanism = "truncated" if len(out) % 2 else "pg"
        extra = {}
        if mechanism == "truncated":
            # Rescale the rates so the prior expected total is near y.: feasible bounds.
            prior_rate *= total * rng.uniform(0.5, 2.0) / (population * prior_rate).sum()
            extra = {"tail": float(rng.choice([0.3, 0.1, 0.01])), "inflation": 1.0}
        out.append((mechanism, epsilon, total, population, prior_rate, extra))
    return out


def test_certified_never_exceeds_epsilon():
    checked = 0
    for mechanism, epsilon, total, population, prior_rate, extra in random_instances(260, 2024):
        try:
            cal = calibrate(
                mechanism, epsilon, total, population, prior_rate, method="certified", **extra
            )
        except ValueError as err:
            assert "infeasible" in str(err)
            continue
        realised = audit(cal)
        assert realised <= epsilon * (1 + 1e-9), (mechanism, epsilon, total, population)
        checked += 1
    assert checked >= 200


@pytest.mark.parametrize("epsilon", [0.5, 2.0])
def test_exact_bivariate_is_exact_for_two_cells(epsilon):
    # For I = 2 the bivariate model is the mechanism: the audit confirms the budget.
    cal = calibrate("truncated", epsilon, 20, [3.0, 9.0], [1.0, 2.0], tail=0.05, method="exact")
    assert audit(cal) <= epsilon * (1 + 1e-6)


def test_md_audit_equals_epsilon():
    cal = calibrate("md", 1.0, 8, np.ones(3))
    assert audit(cal) == pytest.approx(1.0, rel=1e-9)


def test_pg_paper_calibration_can_exceed_nominal_epsilon():
    # docs/privacy.md, Part 2 ("What the other methods guarantee"): with unequal
    # populations the paper's eq (15) is only nominal, even
    # for I = 2 (national prior rate, populations 1 and 100, y. = 20, eps = 1).
    paper = calibrate("pg", 1.0, 20, [1.0, 100.0])
    assert audit(paper) > 1.2
    certified = calibrate("pg", 1.0, 20, [1.0, 100.0], method="certified")
    assert audit(certified) <= 1.0
