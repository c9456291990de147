from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dpcounts.calibration import FRAME_COLUMNS, Calibration
from dpcounts.design import at_epsilon
from dpcounts.privacy.calibrate import calibrate


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
    assert list(frame.columns) == list(FRAME_COLUMNS)
    assert list(frame["cell"]) == [0, 1, 2]
    assert (frame["epsilon"] == 1.0).all() and (frame["total"] == 10).all()


def test_hyperparameter_frame_has_the_published_columns():
    frame = truncated_cal().hyperparameter_frame()
    assert list(frame.columns) == ["a", "b", "population", "prior_rate", "lower", "upper"]
    md = calibrate("md", 1.0, 10, [1.0, 2.0])
    assert list(md.hyperparameter_frame().columns) == ["a", "population"]


POPULATION = np.array([4000.0, 3000.0, 2000.0, 5000.0])
PRIOR = np.array([0.001, 0.004, 0.02, 0.001])


@pytest.mark.parametrize(
    ("mechanism", "method"),
    [("md", "paper"), ("pg", "paper"), ("pg", "certified"), ("truncated", "certified"),
     ("truncated", "exact")],
)  # fmt: skip
@pytest.mark.parametrize("epsilon", [0.0215443, 1.0, 14.678])
def test_table_round_trip_is_exact(mechanism, method, epsilon):
    """to_frame then from_frame gives back the same calibration (every float bit), also
    through Parquet and among the rows of other epsilons."""
    import io

    cals = [calibrate(mechanism, e, 60, POPULATION, PRIOR, method=method)
            for e in (0.1, epsilon, 100.0)]  # fmt: skip
    table = pd.concat([cal.to_frame() for cal in cals], ignore_index=True).assign(arm="x")
    buffer = io.BytesIO()
    table.to_parquet(buffer, index=False)
    table = pd.read_parquet(io.BytesIO(buffer.getvalue()))
    rows = table[at_epsilon(table["epsilon"], epsilon)]
    again = Calibration.from_frame(rows, mechanism, method, POPULATION, PRIOR)
    assert again == cals[1]
    alone = Calibration.from_frame(cals[1].to_frame(), mechanism, method, POPULATION, PRIOR)
    assert alone == cals[1]


def test_from_frame_refuses_a_table_of_several_calibrations():
    """A table of two epsilons' calibrations is not one calibration: the caller selects
    one epsilon's rows by label (the study stage does, dpcounts.studies.stage.simulate)."""
    cals = [calibrate("pg", e, 60, POPULATION, PRIOR) for e in (1.0, 1.00001)]
    table = pd.concat([cal.to_frame() for cal in cals], ignore_index=True)
    with pytest.raises(ValueError, match="not one calibration"):
        Calibration.from_frame(table, "pg", "paper", POPULATION, PRIOR)
    with pytest.raises(ValueError, match="not one calibration"):
        Calibration.from_frame(table.iloc[1:4], "pg", "paper", POPULATION, PRIOR)
    rows = table[at_epsilon(table["epsilon"], 1.00001)]
    assert Calibration.from_frame(rows, "pg", "paper", POPULATION, PRIOR) == cals[1]
