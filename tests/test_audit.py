"""The exact audit: checked against the closed-form epsilon of the MD mechanism."""

from __future__ import annotations

import numpy as np
import pytest

from dpcounts.calibration import Calibration
from dpcounts.privacy.audit import MAX_WORK, audit, audit_work, audit_worst_case
from dpcounts.sampling.enumeration import exact_pmf


def md_calibration(alpha, total, epsilon=1.0) -> Calibration:
    return Calibration(mechanism="md", method="paper", epsilon=epsilon, total=total, a=alpha)


@pytest.mark.parametrize(
    ("n_cells", "total", "epsilon"),
    [(2, 1, 0.5), (2, 12, 1.0), (2, 30, 0.1), (3, 8, 2.0), (3, 15, 0.7), (4, 6, 1.5), (4, 10, 3.0)],
)
def test_md_at_its_bound_realises_epsilon(n_cells, total, epsilon):
    # Machanavajjhala et al.: min alpha >= y./(e^eps - 1) is tight; the audit must find eps.
    alpha = np.full(n_cells, total / np.expm1(epsilon))
    assert audit(md_calibration(alpha, total, epsilon)) == pytest.approx(epsilon, abs=1e-9)


def test_md_unequal_alphas_realise_the_smallest_alphas_epsilon():
    # Worst case: one event in the cell with the smallest alpha, every release in that cell,
    # so eps = log(1 + y./min alpha) whatever the other alphas are.
    total, alpha = 9, np.array([2.5, 0.8, 40.0])
    assert audit(md_calibration(alpha, total)) == pytest.approx(np.log1p(total / 0.8), abs=1e-9)


def test_under_calibrated_md_exceeds_epsilon():
    total, epsilon = 10, 1.0
    alpha = np.full(3, 0.7 * total / np.expm1(epsilon))
    assert audit(md_calibration(alpha, total, epsilon)) > epsilon + 0.1


def test_pg_with_equal_b_over_n_is_md():
    # When b_i / n_i is the same in every cell the success probabilities cancel.
    total, a = 7, np.array([1.5, 3.0, 2.0])
    population = np.array([100.0, 300.0, 200.0])
    pg = Calibration(
        mechanism="pg",
        method="paper",
        epsilon=1.0,
        total=total,
        a=a,
        b=population / 50.0,
        population=population,
    )
    assert audit(pg) == pytest.approx(audit(md_calibration(a, total)), abs=1e-9)


def test_worst_case_is_a_neighbour_pair_attaining_epsilon():
    total = 6
    cal = Calibration(
        mechanism="truncated",
        method="paper",
        epsilon=1.0,
        total=total,
        a=np.array([2.0, 1.0, 3.0]),
        b=np.array([5.0, 1.0, 2.0]),
        population=np.array([10.0, 30.0, 20.0]),
        lower=np.array([0, 1, 0]),
        upper=np.array([4, 5, 3]),
    )
    worst = audit_worst_case(cal)
    assert worst.epsilon == pytest.approx(audit(cal))
    diff = worst.y - worst.x
    assert sorted(diff.tolist()) == [-1, 0, 1] and worst.y.sum() == worst.x.sum() == total
    support, p_y = exact_pmf(worst.y, cal)
    _, p_x = exact_pmf(worst.x, cal)
    row = np.nonzero((support == worst.z).all(axis=1))[0][0]
    assert np.log(p_y[row] / p_x[row]) == pytest.approx(worst.epsilon, rel=1e-9)


def test_truncated_audit_respects_the_design_bound_on_random_instances():
    # docs/privacy.md, Part 2, bound (2) with L' = L and U' = U:
    # |log ratio| <= kappa_i + kappa_j, kappa = log((U + L + a)/(2L + a)).
    rng = np.random.default_rng(20240611)
    for _ in range(15):
        n_cells, total = int(rng.integers(2, 4)), int(rng.integers(3, 10))
        lower = rng.integers(0, 2, n_cells)
        upper = lower + rng.integers(1, total, n_cells)
        if lower.sum() > total or np.minimum(upper, total).sum() < total:
            continue
        a = rng.uniform(0.2, 4.0, n_cells)
        cal = Calibration(
            mechanism="truncated",
            method="certified",
            epsilon=1.0,
            total=total,
            a=a,
            b=rng.uniform(0.1, 10.0, n_cells),
            population=rng.uniform(10.0, 1000.0, n_cells),
            lower=lower,
            upper=upper,
        )
        upper_eff = np.minimum(upper, total)
        kappa = np.sort(np.log((upper_eff + lower + a) / (2 * lower + a)))
        assert audit(cal) <= kappa[-1] + kappa[-2] + 1e-9


def test_too_large_instance_is_refused_before_work():
    cal = md_calibration(np.ones(6), total=200)
    assert audit_work(cal) > 1e12
    with pytest.raises(ValueError, match="max_work"):
        audit(cal)


def test_total_must_match_the_calibration():
    with pytest.raises(ValueError, match="total must equal"):
        audit(md_calibration(np.ones(2), total=5), total=6)


@pytest.mark.parametrize(("n_cells", "largest"), [(2, 8163), (3, 105), (4, 27), (5, 14)])
def test_default_limit_admits_the_documented_totals(n_cells, largest):
    admitted = md_calibration(np.ones(n_cells), total=largest)
    refused = md_calibration(np.ones(n_cells), total=largest + 1)
    assert audit_work(admitted) <= MAX_WORK < audit_work(refused)


def test_chunked_comparison_finds_the_same_worst_case(monkeypatch):
    # the neighbour comparison runs in blocks of rows; tiny blocks must not change the answer
    import dpcounts.privacy.audit as audit_module

    cal = Calibration(
        mechanism="pg",
        method="paper",
        epsilon=1.0,
        total=9,
        a=np.array([0.5, 2.0, 1.0]),
        b=np.array([3.0, 0.1, 1.0]),
        population=np.array([10.0, 40.0, 25.0]),
    )
    whole = audit_worst_case(cal)
    monkeypatch.setattr(audit_module, "_CHUNK_ENTRIES", 7)
    blocked = audit_worst_case(cal)
    assert blocked.epsilon == whole.epsilon
    assert np.array_equal(blocked.z, whole.z)
