from __future__ import annotations

import numpy as np
import pytest

from dpsynth.data.scenarios import draw_datasets, make_scenario
from dpsynth.study1 import MECHANISMS, METRICS, Geography, score_datasets, truth_metrics

STATES = np.array(["NM", "NM", "NY", "NY", "TX", "TX"])
URBAN = np.array([False, False, True, True, True, False])
POP = np.array([3000.0, 1500.0, 90000.0, 40000.0, 60000.0, 5000.0])
RATE = np.array([4e-4, 6e-4, 3e-4, 5e-4, 2e-4, 8e-4])


@pytest.fixture(scope="module")
def setup():
    scenario = make_scenario(4, POP, RATE, total=600)
    geo = Geography(state=STATES, urban=URBAN)
    data = draw_datasets(scenario, 5, np.random.default_rng(3))
    return scenario, geo, data


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_every_mechanism_scores_every_metric(setup, mechanism):
    scenario, geo, data = setup
    scores, sums = score_datasets(
        scenario,
        geo,
        data,
        np.arange(5),
        mechanism,
        [0.5, 5.0],
        np.random.default_rng(1),
        map_epsilons=[5.0],
    )
    assert set(scores["metric"]) == set(METRICS)
    assert len(scores) == 5 * 2 * len(METRICS)
    assert np.isfinite(scores["value"]).all()
    assert set(sums["epsilon"]) == {5.0} and len(sums) == POP.size


def test_truth_metrics_by_hand(setup):
    scenario, geo, _ = setup
    truth = truth_metrics(scenario, geo)
    nm = (3000 * 4e-4 + 1500 * 6e-4) / 4500 * 1e5
    ny = (90000 * 3e-4 + 40000 * 5e-4) / 130000 * 1e5
    assert truth["rate_nm"] == pytest.approx(nm)
    assert truth["ratio_nm_ny"] == pytest.approx(nm / ny)
    assert truth["rmse"] == 0.0


def test_md_and_pg_national_agree_in_scenario_1():
    """Same n and same rate: MD and PG-national have the same posterior mean rates."""
    scenario = make_scenario(1, POP, RATE, total=60)
    geo = Geography(state=STATES, urban=URBAN)
    y = draw_datasets(scenario, 1, np.random.default_rng(5))
    out = {}
    for mech in ("md", "pg_national"):
        many = np.repeat(y, 4000, axis=0)
        scores, _ = score_datasets(
            scenario, geo, many, np.arange(len(many)), mech, [1.0], np.random.default_rng(9)
        )
        out[mech] = scores[scores["metric"] == "rate_urban"]["value"].to_numpy()
    se = np.hypot(out["md"].std(), out["pg_national"].std()) / np.sqrt(4000)
    assert abs(out["md"].mean() - out["pg_national"].mean()) < 4 * se
