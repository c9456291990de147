from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dpsynth.metrics import group_rate_per_100k, rmse_per_100k, summarise, summarise_frame


def test_rmse_by_hand():
    truth = np.array([1e-4, 2e-4])
    draws = np.array([[1e-4, 2e-4], [2e-4, 4e-4]])
    # Second row: errors 1e-4 and 2e-4 -> sqrt((1 + 4) / 2) * 1e-4 * 1e5 = sqrt(2.5) * 10
    np.testing.assert_allclose(rmse_per_100k(draws, truth), [0.0, np.sqrt(2.5) * 10])


def test_group_rate_pools_counts():
    pop = np.array([1000, 3000, 6000])
    rates = np.array([1e-3, 2e-3, 5e-3])
    members = np.array([True, True, False])
    # (1 + 6) events over 4000 people = 175 per 100,000.
    assert group_rate_per_100k(rates, pop, members) == pytest.approx(175.0)
    batched = group_rate_per_100k(np.vstack([rates, 2 * rates]), pop, members)
    np.testing.assert_allclose(batched, [175.0, 350.0])
    with pytest.raises(ValueError, match="no cells"):
        group_rate_per_100k(rates, pop, np.zeros(3, bool))


def test_summaries():
    s = summarise(np.arange(1001))
    assert s == {"median": 500.0, "lower": 25.0, "upper": 975.0}
    frame = pd.DataFrame({"g": ["a"] * 101 + ["b"] * 101, "value": list(range(101)) * 2})
    out = summarise_frame(frame, ["g"])
    assert list(out["g"]) == ["a", "b"] and list(out["median"]) == [50.0, 50.0]


def test_summaries_skip_undefined_values():
    assert summarise([1.0, np.nan, 3.0])["median"] == 2.0
    assert np.isnan(summarise([np.nan])["median"])
