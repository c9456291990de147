from __future__ import annotations

import json

import numpy as np
import pytest

from dpsynth.calibration import Calibration


def truncated_cal(**overrides):
    fields = dict(
        mechanism="truncated",
        method="paper",
        epsilon=1.0,
        total=10,
        a=[0.5, 2.0, 1.0],
        b=[0.5e4, 2.0e4, 1e4],
        population=[1000, 3000, 2000],
        prior_rate=[1e-4, 1e-4, 1e-4],
        lower=[0, 1, 0],
        upper=[4, 8, 6],
        tail=1e-3,
    )
    fields.update(overrides)
    return Calibration(**fields)


def test_round_trip_through_json():
    cal = truncated_cal()
    again = Calibration.from_dict(json.loads(json.dumps(cal.to_dict())))
    assert again == cal
    assert again != truncated_cal(a=[0.5, 2.0, 1.5])


def test_arrays_are_frozen_copies():
    a = np.array([1.0, 2.0, 3.0])
    cal = truncated_cal(a=a)
    a[0] = 99.0
    assert cal.a[0] == 1.0
    with pytest.raises(ValueError):
        cal.a[0] = 5.0


def test_clamp_and_bounds():
    cal = truncated_cal()
    assert cal.clamp([9, 0, 1]).tolist() == [4, 1, 1]
    lo, hi = cal.bounds()
    assert lo.tolist() == [0, 1, 0] and hi.tolist() == [4, 8, 6]
    md = Calibration("md", "paper", 1.0, 10, a=[1.0, 1.0])
    assert md.clamp([10, 0]).tolist() == [10, 0]
    assert md.bounds()[1].tolist() == [10, 10]


def test_log_success_is_log_n_over_b_plus_2n():
    cal = truncated_cal()
    n, b = np.array([1000, 3000, 2000.0]), np.array([0.5e4, 2.0e4, 1e4])
    np.testing.assert_allclose(np.exp(cal.log_success()), n / (b + 2 * n))


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"mechanism": "laplace"}, "mechanism"),
        ({"method": "magic"}, "method"),
        ({"b": [1.0, 2.0]}, "b has 2 cells"),
        ({"lower": None}, "both lower and upper"),
        ({"lower": None, "upper": None}, "needs lower and upper"),
        ({"a": [[1.0, 2.0, 3.0]]}, "one-dimensional"),
    ],
)
def test_inconsistent_fields_are_refused(overrides, message):
    with pytest.raises(ValueError, match=message):
        truncated_cal(**overrides)


def test_frame_has_one_row_per_cell():
    frame = truncated_cal().to_frame()
    assert list(frame["cell"]) == [0, 1, 2]
    assert {"a", "b", "lower", "upper", "population", "prior_rate"} <= set(frame.columns)
