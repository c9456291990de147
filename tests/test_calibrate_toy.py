"""Quick (2022), Section 2.3 toy example (y. = 100, E[y] = (15, 85), eps = 1, tail = 1e-4).

The paper states bounds rounded down ("a_1 > 116"), so a reproduction means our value lies
in [stated, stated + one unit of the last stated digit).
"""

import numpy as np
import pytest

from dpcounts import audit, calibrate

TOY = {"epsilon": 1.0, "total": 100, "population": [15.0, 85.0]}


def toy(mechanism, method, **extra):
    return calibrate(
        mechanism, TOY["epsilon"], TOY["total"], TOY["population"], method=method, **extra
    )


def test_untruncated_paper_numbers_are_reproduced():
    cal = toy("pg", "paper")
    assert 116 <= cal.a[0] < 117 and 58 <= cal.a[1] < 59


def test_equal_populations_with_unequal_rates_give_the_same_shapes():
    swapped = calibrate("pg", 1.0, 100, [100.0, 100.0], [0.15, 0.85])
    np.testing.assert_allclose(swapped.a, toy("pg", "paper").a, rtol=1e-9)


def test_truncated_exact_reproduces_a2_and_keeps_eps():
    cal = toy("truncated", "exact", tail=1e-4)
    assert cal.a[1] == pytest.approx(0.001)  # the paper's "a_2 > 0.001": our floor
    assert audit(cal) <= 1.0


@pytest.mark.xfail(
    strict=True,
    reason="not reproduced: our exact bivariate a_1 is 7.80 with bounds [3, 32] (tail "
    "1e-4); the paper's 6.85 with worst case z_1 = 30 matches neither these bounds nor "
    "bounds ending at 30 (a_1 = 6.59); its optimiser (supplement B.2) is unavailable",
)
def test_truncated_exact_a1_matches_the_paper():
    cal = toy("truncated", "exact", tail=1e-4)
    assert 6.85 <= cal.a[0] < 6.86
